package org.ldpstream.sdk;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;
import java.util.Map;

/** The JSON request file of a test tool: {@code {"collection": spec, "values": [...], ...}}. */
final class ToolRequest {
  final Map<String, Object> fields;
  final CollectionSpec spec;

  @SuppressWarnings("unchecked")
  ToolRequest(String path) throws IOException {
    fields = (Map<String, Object>) Json.parse(
        new String(Files.readAllBytes(Paths.get(path)), StandardCharsets.UTF_8));
    spec = CollectionSpec.fromJson(fields.get("collection"));
  }

  Object get(String key) {
    return fields.get(key);
  }

  /** The request's {@code values}, one per device or report. */
  @SuppressWarnings("unchecked")
  List<Object> values() {
    return (List<Object>) fields.get("values");
  }
}
