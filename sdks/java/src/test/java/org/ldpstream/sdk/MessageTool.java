package org.ldpstream.sdk;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * One device action from the command line, on a device store file (the Python SDK's format):
 * {@code MessageTool SPEC.json VALUE STORE.json NOW [json|enqueue|permanent]} prints the binary
 * message as hex (or the JSON text; enqueue: true/false; permanent: the permanent answer's
 * JSON), or {@code null} when the cadence is used up. Used by tests/sdks to check that stores
 * move between the SDKs and Python.
 */
public final class MessageTool {
  private MessageTool() {}

  public static void main(String[] args) throws Exception {
    CollectionSpec spec = CollectionSpec.parse(
        new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8));
    // A JSON list or object: a set of labels, or an attribute tuple.
    Object value = args[1].startsWith("[") || args[1].startsWith("{") ? Json.parse(args[1])
        : "categories".equals(spec.domainKind) ? args[1] : (Object) Double.valueOf(args[1]);
    double now = Double.parseDouble(args[3]);
    Device device = Device.builder(spec).store(new FileStore(new java.io.File(args[2])))
        .clock(() -> now).build();
    String mode = args.length > 4 ? args[4] : "binary";
    String out;
    if ("json".equals(mode)) {
      String msg = device.messageJson(value);
      out = msg == null ? "null" : msg;
    } else if ("enqueue".equals(mode)) {
      out = String.valueOf(device.enqueue(value));
    } else if ("permanent".equals(mode)) {
      out = Json.write(device.permanent(value));
    } else {
      byte[] msg = device.message(value);
      out = msg == null ? "null" : Hex.encode(msg);
    }
    System.out.println(out);
  }
}
