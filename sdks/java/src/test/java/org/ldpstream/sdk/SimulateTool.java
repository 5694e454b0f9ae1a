package org.ldpstream.sdk;

import java.util.ArrayList;
import java.util.List;

/**
 * End-to-end driver (tests/sdks/test_sdk_e2e.py): args[0] = gateway URL, args[1] = a JSON
 * file {@code {"collection", "values", "format": "binary"|"json", "batch"}}. Every value is one
 * simulated device (its own Device, store, secret and cadence) building one message;
 * the messages go to the gateway {@code batch} at a time through GatewayClient. Prints the
 * summed {@code {"accepted_messages", "accepted_reports"}}.
 */
public final class SimulateTool {
  private SimulateTool() {}

  public static void main(String[] args) throws Exception {
    ToolRequest req = new ToolRequest(args[1]);
    CollectionSpec spec = req.spec;
    GatewayClient client = new GatewayClient(args[0], (String) req.get("api_key"));
    int batch = req.get("batch") == null ? 500 : ((Long) req.get("batch")).intValue();
    boolean json = "json".equals(req.get("format"));
    List<Object> values = req.values();
    long messages = 0;
    long reports = 0;
    for (int start = 0; start < values.size(); start += batch) {
      List<Object> chunk = values.subList(start, Math.min(values.size(), start + batch));
      GatewayClient.Accepted out;
      if (json) {
        List<String> msgs = new ArrayList<>();
        for (Object v : chunk) {
          msgs.add(Device.builder(spec).store(new MemoryStore()).build().messageJson(v));
        }
        out = client.sendJson(msgs);
      } else {
        List<byte[]> msgs = new ArrayList<>();
        for (Object v : chunk) {
          msgs.add(Device.builder(spec).store(new MemoryStore()).build().message(v));
        }
        out = client.send(msgs);
      }
      messages += out.messages;
      reports += out.reports;
    }
    System.out.println("{\"accepted_messages\":" + messages + ",\"accepted_reports\":" + reports
        + "}");
  }
}
