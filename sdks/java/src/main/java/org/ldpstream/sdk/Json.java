package org.ldpstream.sdk;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A minimal JSON reader and writer (the SDK has no runtime dependencies).
 *
 * <p>Objects become {@link LinkedHashMap}, arrays {@link ArrayList}, numbers {@link Long}
 * (or {@link BigInteger} when too large) unless they have a fraction or exponent
 * ({@link Double}), plus String, Boolean and null.
 */
final class Json {
  /**
   * The two-character escapes of JSON strings (RFC 8259 §7): the letter after the backslash
   * and, at the same position, the character it stands for. The reader takes them all; the
   * writer ({@link Canonical#pyString}) writes all but '/', which Python writes bare.
   */
  static final String ESCAPE_LETTERS = "\"\\/bfnrt";
  static final String ESCAPED_CHARS = "\"\\/\b\f\n\r\t";

  private final String s;
  private int at;

  private Json(String s) {
    this.s = s;
  }

  /** Parse one JSON value (the whole text). */
  public static Object parse(String text) {
    Json p = new Json(text);
    p.ws();
    Object v = p.value(0);
    p.ws();
    if (p.at != text.length()) {
      throw p.error("trailing characters");
    }
    return v;
  }

  private IllegalArgumentException error(String msg) {
    return new IllegalArgumentException("invalid JSON at " + at + ": " + msg);
  }

  private void ws() {
    while (at < s.length() && " \t\r\n".indexOf(s.charAt(at)) >= 0) {
      at++;
    }
  }

  private Object value(int depth) {
    if (depth > 64) {
      throw error("nested too deep");
    }
    if (at >= s.length()) {
      throw error("unexpected end");
    }
    char c = s.charAt(at);
    if (c == '{') {
      at++;
      Map<String, Object> out = new LinkedHashMap<>();
      ws();
      if (peek('}')) {
        return out;
      }
      while (true) {
        ws();
        if (at >= s.length() || s.charAt(at) != '"') {
          throw error("object key expected");
        }
        String k = string();
        ws();
        expect(':');
        ws();
        out.put(k, value(depth + 1));
        ws();
        if (peek('}')) {
          return out;
        }
        expect(',');
      }
    }
    if (c == '[') {
      at++;
      List<Object> out = new ArrayList<>();
      ws();
      if (peek(']')) {
        return out;
      }
      while (true) {
        ws();
        out.add(value(depth + 1));
        ws();
        if (peek(']')) {
          return out;
        }
        expect(',');
      }
    }
    if (c == '"') {
      return string();
    }
    if (s.startsWith("true", at)) {
      at += 4;
      return Boolean.TRUE;
    }
    if (s.startsWith("false", at)) {
      at += 5;
      return Boolean.FALSE;
    }
    if (s.startsWith("null", at)) {
      at += 4;
      return null;
    }
    return number();
  }

  private boolean peek(char c) {
    if (at < s.length() && s.charAt(at) == c) {
      at++;
      return true;
    }
    return false;
  }

  private void expect(char c) {
    if (!peek(c)) {
      throw error("'" + c + "' expected");
    }
  }

  private String string() {
    at++;
    StringBuilder b = new StringBuilder();
    while (true) {
      if (at >= s.length()) {
        throw error("unterminated string");
      }
      char c = s.charAt(at++);
      if (c == '"') {
        return b.toString();
      }
      if (c != '\\') {
        b.append(c);
        continue;
      }
      char e = s.charAt(at++);
      int k = ESCAPE_LETTERS.indexOf(e);
      if (k >= 0) {
        b.append(ESCAPED_CHARS.charAt(k));
      } else if (e == 'u') {
        b.append((char) Integer.parseInt(s.substring(at, at + 4), 16));
        at += 4;
      } else {
        throw error("bad escape");
      }
    }
  }

  private Object number() {
    int start = at;
    boolean real = false;
    while (at < s.length() && "+-0123456789.eE".indexOf(s.charAt(at)) >= 0) {
      char c = s.charAt(at++);
      real |= c == '.' || c == 'e' || c == 'E';
    }
    String t = s.substring(start, at);
    if (t.isEmpty()) {
      throw error("value expected");
    }
    if (real) {
      return Double.parseDouble(t);
    }
    BigInteger big = new BigInteger(t);
    return big.bitLength() < 64 ? (Object) big.longValue() : big;
  }

  /** Compact JSON text of maps, lists, strings, numbers, booleans and null. */
  public static String write(Object v) {
    StringBuilder b = new StringBuilder();
    Canonical.write(b, v, false);
    return b.toString();
  }
}
