package org.ldpstream.sdk;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;

/**
 * The averaging attack over app reloads (bench/sdk_reloads.py): {@code ReloadsTool SPEC.json
 * TRUTH.json RELOADS file|memory DIR} — for every user, RELOADS times a new Device (an app
 * start) on the user's store (a file under DIR, or a new MemoryStore each time) reports the
 * value. Prints, per user, the answers as a JSON list of lists.
 */
public final class ReloadsTool {
  private ReloadsTool() {}

  @SuppressWarnings("unchecked")
  public static void main(String[] args) throws Exception {
    CollectionSpec spec = CollectionSpec.parse(
        new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8));
    List<Object> truth = (List<Object>) Json.parse(
        new String(Files.readAllBytes(Paths.get(args[1])), StandardCharsets.UTF_8));
    int reloads = Integer.parseInt(args[2]);
    boolean file = "file".equals(args[3]);
    StringBuilder b = new StringBuilder("[");
    for (int u = 0; u < truth.size(); u++) {
      b.append(u > 0 ? "," : "").append('[');
      for (int r = 0; r < reloads; r++) {
        DeviceStore store = file ? new FileStore(new File(args[4], "u" + u + ".json"))
            : new MemoryStore();
        Object y = Device.builder(spec).store(store).build().report(truth.get(u)).get("y");
        b.append(r > 0 ? "," : "").append(y);
      }
      b.append(']');
    }
    System.out.println(b.append(']'));
  }
}
