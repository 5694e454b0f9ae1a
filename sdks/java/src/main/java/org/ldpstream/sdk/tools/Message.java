package org.ldpstream.sdk.tools;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import org.ldpstream.sdk.CollectionSpec;
import org.ldpstream.sdk.Device;
import org.ldpstream.sdk.Json;

/**
 * One device message from the command line, with the memo in a file (the Python SDK's memo
 * file format): {@code Message SPEC.json VALUE MEMO.json NOW [json]} prints the binary
 * message as hex (or the JSON text), or {@code null} when the cadence is used up. Used by
 * tests/sdks to check that memo files move between the SDKs and Python.
 */
public final class Message {
  private Message() {}

  public static void main(String[] args) throws Exception {
    CollectionSpec spec = CollectionSpec.parse(
        new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8));
    // A JSON list or object: a set of labels, or an attribute tuple.
    Object value = args[1].startsWith("[") || args[1].startsWith("{") ? Json.parse(args[1])
        : "categories".equals(spec.domainKind) ? args[1] : (Object) Double.valueOf(args[1]);
    double now = Double.parseDouble(args[3]);
    Device device = new Device(spec, null, Paths.get(args[2]), () -> now);
    if (args.length > 4 && "json".equals(args[4])) {
      String msg = device.messageJson(value);
      System.out.println(msg == null ? "null" : msg);
      return;
    }
    byte[] msg = device.message(value);
    if (msg == null) {
      System.out.println("null");
      return;
    }
    StringBuilder b = new StringBuilder();
    for (byte x : msg) {
      b.append(String.format("%02x", x & 0xff));
    }
    System.out.println(b);
  }
}
