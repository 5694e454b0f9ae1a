package org.ldpstream.sdk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.math.BigInteger;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.KeyFactory;
import java.security.interfaces.RSAPrivateKey;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Queued reports with Privacy Pass tokens: the token of the report's (collection, window) is
 * obtained when it is queued (kept with it) or when it is sent, while the window is open; what
 * can no longer be counted is dropped and counted. A scripted gateway and an issuer that
 * blind-signs with the shared vectors' key stand in for the real ones (the real ones:
 * tests/sdks/test_sdk_tokens.py). */
class QueueTokensTest {
  private static final long WS = 600;
  private static final long T0 = 1800000000L;  // a window start
  private static final String DEAD = "http://127.0.0.1:9";
  private static final byte[] SECRET = new byte[16];
  private static final CollectionSpec SPEC = Specs.collection("qt",
      Specs.oracle("grr", 1.0, 3, ""), Specs.categories("a", "b", "c"),
      ",\"window_seconds\":600,\"memoization\":\"none\",\"reports_per_window\":3");

  @SuppressWarnings("unchecked")
  private static Map<String, Object> vector() throws IOException {
    String text = new String(Files.readAllBytes(VectorsTest.vectors().resolve(
        "privacypass/tokens.json")), StandardCharsets.UTF_8);
    return (Map<String, Object>) ((List<Object>) ((Map<String, Object>) Json.parse(text))
        .get("cases")).get(0);
  }

  /** An issuer listing the key of {@code windows}, blind-signing every request. */
  static HttpServer issuer(List<String> asked, long... windows) throws Exception {
    Map<String, Object> v = vector();
    String pem = ((String) v.get("sk_pem")).replaceAll("-----[A-Z ]+-----|\\s", "");
    RSAPrivateKey sk = (RSAPrivateKey) KeyFactory.getInstance("RSA").generatePrivate(
        new PKCS8EncodedKeySpec(Base64.getDecoder().decode(pem)));
    BigInteger n = new BigInteger((String) v.get("n"), 16);
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext("/", ex -> {
      byte[] body = Io.readAll(ex.getRequestBody());
      byte[] out;
      if ("GET".equals(ex.getRequestMethod())) {
        StringBuilder keys = new StringBuilder();
        for (long w : windows) {
          keys.append(keys.length() > 0 ? "," : "").append("{\"token-type\":2,\"token-key\":\"")
              .append(v.get("token_key")).append("\",\"ldp-collection\":\"qt\",\"ldp-window\":")
              .append(w).append(",\"ldp-window-seconds\":").append(WS).append('}');
        }
        out = ("{\"ldp-issuer-name\":\"ldpstream\",\"token-keys\":[" + keys + "]}")
            .getBytes(StandardCharsets.UTF_8);
      } else {
        asked.add(ex.getRequestURI().getQuery().replaceAll(".*window=", ""));
        out = new byte[body.length / 259 * PrivacyPass.NK];
        for (int i = 0; i * 259 < body.length; i++) {
          BigInteger z = new BigInteger(1, Arrays.copyOfRange(body, i * 259 + 3, i * 259 + 259));
          byte[] s = PrivacyPass.i2osp(z.modPow(sk.getPrivateExponent(), n), PrivacyPass.NK);
          System.arraycopy(s, 0, out, i * PrivacyPass.NK, PrivacyPass.NK);
        }
      }
      ex.sendResponseHeaders(200, out.length);
      try (OutputStream o = ex.getResponseBody()) {
        o.write(out);
      }
      ex.close();
    });
    server.start();
    return server;
  }

  /** A gateway answering (status, reason) from {@code script} in turn, then 202. */
  static HttpServer gateway(List<String> seen, final List<String[]> script) throws IOException {
    return GatewayClientTest.serve((ex, body, call) -> {
      seen.add(ex.getRequestHeaders().getFirst("Authorization") + " "
          + new String(body, StandardCharsets.UTF_8));
      String[] next = script.isEmpty() ? null : script.remove(0);
      if (next == null) {
        GatewayClientTest.reply(ex, 202, "{\"accepted_messages\":1,\"accepted_reports\":1}");
      } else {
        GatewayClientTest.reply(ex, Integer.parseInt(next[0]), "{\"reason\":\"" + next[1]
            + "\"}");
      }
    });
  }

  static GatewayClient client(String url, String issuerUrl) {
    return new GatewayClient(url, null).maxRetries(0).sleeper(ms -> { }).tokens(issuerUrl, SECRET);
  }

  static Device device(MemoryStore store, double now) {
    return Device.builder(SPEC).store(store).secret(SECRET).clock(() -> now).build();
  }

  @Test
  void aReportQueuedWithItsTokenIsSentWithItThoughTheIssuerIsGoneByThen() throws Exception {
    List<String> asked = new ArrayList<>();
    HttpServer iss = issuer(asked, T0);
    MemoryStore store = new MemoryStore();
    assertTrue(device(store, T0 + 5).enqueue("a", false, client(DEAD, GatewayClientTest.url(iss))));
    iss.stop(0);
    Map<String, Object> entry = store.outbox().get(0);
    assertEquals(T0, entry.get("window"));
    assertEquals(WS, entry.get("window_seconds"));
    byte[] token = PrivacyPass.b64urlDecode((String) entry.get("token"));
    PrivacyPass.RsaKey key = PrivacyPass.keyFromSpki(
        Base64.getUrlDecoder().decode((String) vector().get("token_key")));
    assertTrue(PrivacyPass.pssVerify(key, Arrays.copyOf(token, 98),
        Arrays.copyOfRange(token, 98, token.length)));
    List<String> seen = new ArrayList<>();
    HttpServer gw = gateway(seen, new ArrayList<String[]>());
    try {
      GatewayClient.QueueResult r = client(GatewayClientTest.url(gw), DEAD)
          .sendQueued(store, (T0 + 60) * 1000);
      assertEquals(Arrays.asList(1L, 0L, 0L, 0L), Arrays.asList(r.sent, r.refused, r.pending,
          r.expired));
      assertTrue(seen.get(0).startsWith("PrivateToken token=\"" + entry.get("token") + "\" "));
    } finally {
      gw.stop(0);
    }
  }

  @Test
  void offlineWhenQueuedTheTokenIsObtainedWhenSentInItsWindowAfterItDropped() throws Exception {
    MemoryStore store = new MemoryStore();
    GatewayClient offline = client(DEAD, DEAD);
    assertTrue(device(store, T0 - 10).enqueue("a", false, offline));  // the last window
    assertTrue(device(store, T0 + 10).enqueue("b", false, offline));
    assertTrue(device(store, T0 + 20).enqueue("c", true, offline));
    for (Map<String, Object> e : store.outbox()) {
      assertNull(e.get("token"));
    }
    GatewayClient.QueueResult down = offline.sendQueued(store, (T0 + 30) * 1000);
    assertEquals(Arrays.asList(0L, 2L, 1L), Arrays.asList(down.sent, down.pending, down.expired));
    List<String> asked = new ArrayList<>();
    List<String> seen = new ArrayList<>();
    HttpServer iss = issuer(asked, T0, T0 + WS);
    HttpServer gw = gateway(seen, new ArrayList<String[]>());
    try {
      GatewayClient.QueueResult r = client(GatewayClientTest.url(gw), GatewayClientTest.url(iss))
          .sendQueued(store, (T0 + 30) * 1000);
      assertEquals(Arrays.asList(2L, 0L, 0L, 1L), Arrays.asList(r.sent, r.refused, r.pending,
          r.expired));
    } finally {
      gw.stop(0);
      iss.stop(0);
    }
    assertEquals(Arrays.asList(String.valueOf(T0), String.valueOf(T0)), asked);
    assertEquals(2, seen.size());
    assertTrue(seen.get(0).matches("PrivateToken token=\"[A-Za-z0-9_-]+\" .*"));
    assertTrue(seen.get(1).startsWith("null {"));  // JSON: the token in the message
    Map<?, ?> json = (Map<?, ?>) Json.parse(seen.get(1).substring(5));
    assertEquals(1, ((List<?>) json.get("tokens")).size());
    assertEquals(1L, store.expired());
  }

  @Test
  void keyExpiredIsDroppedAndAReplayOfItsOwnTokenWasDelivered() throws Exception {
    List<String> asked = new ArrayList<>();
    HttpServer iss = issuer(asked, T0);
    MemoryStore store = new MemoryStore();
    GatewayClient online = client(DEAD, GatewayClientTest.url(iss));
    for (String v : new String[] {"a", "b", "c"}) {
      assertTrue(device(store, T0).enqueue(v, false, online));
    }
    iss.stop(0);
    List<String> seen = new ArrayList<>();
    List<String[]> script = new ArrayList<>(Arrays.asList(new String[] {"403",
        "token_key_expired"}, new String[] {"409", "token_replayed"},
        new String[] {"403", "token_window"}));
    HttpServer gw = gateway(seen, script);
    try {
      GatewayClient c = client(GatewayClientTest.url(gw), DEAD);
      GatewayClient.QueueResult first = c.sendQueued(store, T0 * 1000);
      // token_window: the gateway's clock is not in the window yet: kept for the next call
      assertEquals(Arrays.asList(1L, 0L, 1L, 1L), Arrays.asList(first.sent, first.refused,
          first.expired, first.pending));
      GatewayClient.QueueResult again = c.sendQueued(store, T0 * 1000 + 1000);
      assertEquals(Arrays.asList(1L, 0L), Arrays.asList(again.sent, again.pending));
    } finally {
      gw.stop(0);
    }
    assertEquals(4, seen.size());
    assertEquals(seen.get(2), seen.get(3));  // the same report with the same token
    assertFalse(Collections.frequency(seen, seen.get(0)) > 1);
  }
}
