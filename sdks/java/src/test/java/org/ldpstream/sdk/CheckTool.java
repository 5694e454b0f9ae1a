package org.ldpstream.sdk;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Whether the SDK accepts served specs: {@code CheckTool SPECS.json} reads a JSON list of
 * collections and prints one JSON line per spec, {@code {"ok":true}} or {@code {"ok":false,
 * "error":...,"parameter":...}}. Used by tests/sdks to compare with ldpcore's ranges.
 */
public final class CheckTool {
  private CheckTool() {}

  @SuppressWarnings("unchecked")
  public static void main(String[] args) throws Exception {
    List<Object> specs = (List<Object>) Json.parse(
        new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8));
    for (Object raw : specs) {
      Map<String, Object> out = new LinkedHashMap<>();
      try {
        CollectionSpec.fromJson(raw);
        out.put("ok", true);
      } catch (RuntimeException e) {
        out.put("ok", false);
        out.put("error", e.getMessage());
        out.put("type", e.getClass().getSimpleName());
        out.put("parameter", e instanceof SpecException ? ((SpecException) e).parameter() : null);
      }
      System.out.println(Json.write(out));
    }
  }
}
