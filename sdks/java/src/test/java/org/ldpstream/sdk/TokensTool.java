package org.ldpstream.sdk;

import java.security.SecureRandom;
import java.util.Collections;
import java.util.List;

/**
 * Devices with Privacy Pass tokens (the end-to-end test's driver): {@code TokensTool request.json}
 * with {collection, gateway, issuer, key, honest, greedy_posts, values}.  Honest devices (each
 * its own secret) send one message each (binary and JSON alternately); one greedy device sends
 * {@code greedy_posts}.  Prints JSON counts of what was accepted and refused.
 */
public final class TokensTool {
  private TokensTool() {}

  public static void main(String[] args) throws Exception {
    ToolRequest req = new ToolRequest(args[0]);
    CollectionSpec spec = req.spec;
    String gw = (String) req.get("gateway");
    String issuer = (String) req.get("issuer");
    String key = (String) req.get("key");
    List<Object> values = req.values();
    SecureRandom rnd = new SecureRandom();
    long honest = 0;
    long n = (Long) req.get("honest");
    for (int i = 0; i < n; i++) {
      byte[] secret = new byte[16];
      rnd.nextBytes(secret);
      GatewayClient client = new GatewayClient(gw, key).tokens(issuer, secret);
      Device dev = Device.builder(spec).store(new MemoryStore()).build(); // a new device
      honest += i % 2 == 0 ? client.send(dev.message(values.get(i))).reports
          : client.sendJson(Collections.singletonList(dev.messageJson(values.get(i)))).reports;
    }
    byte[] secret = new byte[16];
    rnd.nextBytes(secret);
    GatewayClient greedy = new GatewayClient(gw, key).tokens(issuer, secret);
    long accepted = 0;
    long refused = 0;
    StringBuilder reasons = new StringBuilder();
    for (int j = 0; j < (Long) req.get("greedy_posts"); j++) {
      try {
        // the greedy device resets its store to make a report per post; its tokens stop it
        Device fresh = Device.builder(spec).store(new MemoryStore()).build();
        accepted += greedy.send(fresh.message(values.get(0))).reports;
      } catch (PrivacyPass.IssuanceException e) {
        refused++;
        reasons.append(reasons.length() > 0 ? "," : "").append(e.reason);
      } catch (GatewayException e) {
        refused++;
        reasons.append(reasons.length() > 0 ? "," : "").append("gateway:").append(e.reason);
      }
    }
    System.out.print("{\"honest\":" + honest + ",\"greedy_accepted\":" + accepted
        + ",\"greedy_refused\":" + refused + ",\"reasons\":\"" + reasons + "\"}");
  }
}
