package org.ldpstream.sdk;

/** Lower-case hex (no java.util.HexFormat / Base64 on older Android). */
final class Hex {
  private Hex() {}

  private static final char[] DIGITS = "0123456789abcdef".toCharArray();

  static String encode(byte[] b) {
    char[] out = new char[2 * b.length];
    for (int i = 0; i < b.length; i++) {
      out[2 * i] = DIGITS[(b[i] >> 4) & 0xf];
      out[2 * i + 1] = DIGITS[b[i] & 0xf];
    }
    return new String(out);
  }

  static byte[] decode(String h) {
    if (h.length() % 2 != 0) {
      throw new IllegalArgumentException("odd-length hex");
    }
    byte[] out = new byte[h.length() / 2];
    for (int i = 0; i < out.length; i++) {
      out[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
    }
    return out;
  }
}
