package org.ldpstream.sdk;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** String escapes: the writer matches Python's json.dumps, and the reader takes them back. */
class JsonTest {
  @Test
  void escapesAreWrittenAsPythonWritesThemAndReadBack() {
    String raw = "a\"b\\c/d\be\ff\ng\rh\ti\u0001j\u00e9";
    String text = "\"a\\\"b\\\\c/d\\be\\ff\\ng\\rh\\ti\\u0001j\\u00e9\"";
    assertEquals(text, Canonical.pyString(raw));
    assertEquals(raw, Json.parse(text));
    assertEquals("/", Json.parse("\"\\/\""));
  }
}
