package org.ldpstream.sdk;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Map;

/**
 * Canonical JSON exactly as ldpcore's {@code canonical_json} (Python's
 * {@code json.dumps(sort_keys=True, separators=(",", ":"))}) and spec fingerprints.
 */
final class Canonical {
  private Canonical() {}

  /** A float that prints as Python's repr ({@code 1.0}, not {@code 1}). */
  static final class PyFloat {
    public final double value;

    public PyFloat(double value) {
      this.value = value;
    }
  }

  /** Python's {@code repr(float)}: shortest round-trip digits, positional for exponents in [-4, 16). */
  public static String pyFloat(double x) {
    if (Double.isNaN(x) || Double.isInfinite(x)) {
      throw new IllegalArgumentException("not a finite number: " + x);
    }
    if (x == 0) {
      return (1 / x < 0) ? "-0.0" : "0.0";
    }
    BigDecimal exact = new BigDecimal(x);
    BigDecimal shortest = exact;
    for (int p = 1; p <= 17; p++) {
      BigDecimal r = exact.round(new MathContext(p, RoundingMode.HALF_EVEN));
      if (r.doubleValue() == x) {
        shortest = r;
        break;
      }
    }
    String digits = shortest.unscaledValue().abs().toString().replaceAll("0+$", "");
    if (digits.isEmpty()) {
      digits = "0";
    }
    int exp = shortest.precision() - shortest.scale() - 1;
    String body;
    if (exp >= -4 && exp < 16) {
      if (exp >= 0) {
        String intPart = digits.length() > exp + 1 ? digits.substring(0, exp + 1)
            : digits + Io.zeros(exp + 1 - digits.length());
        String frac = digits.length() > exp + 1 ? digits.substring(exp + 1) : "0";
        body = intPart + "." + frac;
      } else {
        body = "0." + Io.zeros(-exp - 1) + digits;
      }
    } else {
      String m = digits.length() > 1 ? digits.charAt(0) + "." + digits.substring(1) : digits;
      String e = String.valueOf(Math.abs(exp));
      body = m + "e" + (exp < 0 ? "-" : "+") + (e.length() < 2 ? "0" + e : e);
    }
    return x < 0 ? "-" + body : body;
  }

  /** A JSON string literal as Python writes it with ensure_ascii. */
  public static String pyString(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      int k = c == '/' ? -1 : Json.ESCAPED_CHARS.indexOf(c);
      if (k >= 0) {
        b.append('\\').append(Json.ESCAPE_LETTERS.charAt(k));
      } else if (c < 0x20 || c > 0x7e) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    return b.append('"').toString();
  }

  /** Canonical JSON text: keys sorted, no spaces; {@link PyFloat} for floats, Long for ints. */
  public static String json(Object v) {
    StringBuilder b = new StringBuilder();
    write(b, v);
    return b.toString();
  }

  private static void write(StringBuilder b, Object v) {
    write(b, v, true);
  }

  /** Canonical key order: the keys are strings, in String order. */
  private static final Comparator<Object> KEY_ORDER = new Comparator<Object>() {
    @Override
    public int compare(Object x, Object y) {
      return ((String) x).compareTo((String) y);
    }
  };

  /**
   * JSON text of maps, lists, strings, numbers, booleans and null. Canonical: keys sorted, a
   * Double must hold an integer (floats are {@link PyFloat}); otherwise keys in map order and
   * a Double or Float written as Python writes a float.
   */
  static void write(StringBuilder b, Object v, boolean canonical) {
    if (v == null) {
      b.append("null");
    } else if (v instanceof PyFloat) {
      b.append(pyFloat(((PyFloat) v).value));
    } else if (canonical && v instanceof Double) {
      double d = (Double) v;
      if (d != Math.rint(d) || Math.abs(d) > 9007199254740992.0) {
        throw new IllegalArgumentException("integer expected, got " + d);
      }
      b.append((long) d);
    } else if (v instanceof Double || (!canonical && v instanceof Float)) {
      b.append(pyFloat(((Number) v).doubleValue()));
    } else if (v instanceof String) {
      b.append(pyString((String) v));
    } else if (v instanceof Map) {
      Map<?, ?> m = (Map<?, ?>) v;
      List<Object> keys = new ArrayList<>(m.keySet());
      if (canonical) {
        Collections.sort(keys, KEY_ORDER);
      }
      b.append('{');
      for (int i = 0; i < keys.size(); i++) {
        if (i > 0) {
          b.append(',');
        }
        b.append(pyString(String.valueOf(keys.get(i)))).append(':');
        write(b, m.get(keys.get(i)), canonical);
      }
      b.append('}');
    } else if (v instanceof List) {
      List<?> l = (List<?>) v;
      b.append('[');
      for (int i = 0; i < l.size(); i++) {
        if (i > 0) {
          b.append(',');
        }
        write(b, l.get(i), canonical);
      }
      b.append(']');
    } else if (v instanceof int[]) {
      b.append(Arrays.toString((int[]) v).replace(" ", ""));
    } else {
      b.append(v); // Long, BigInteger, Boolean
    }
  }

  /** SHA-256 of the bytes in lower-case hex. */
  public static String sha256Hex(byte[] data) {
    try {
      byte[] h = MessageDigest.getInstance("SHA-256").digest(data);
      StringBuilder b = new StringBuilder();
      for (byte x : h) {
        b.append(String.format("%02x", x & 0xff));
      }
      return b.toString();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** 16-hex-digit fingerprint: SHA-256 prefix of the canonical JSON. */
  public static String fingerprint(Object canonical) {
    return sha256Hex(json(canonical).getBytes(StandardCharsets.UTF_8)).substring(0, 16);
  }
}
