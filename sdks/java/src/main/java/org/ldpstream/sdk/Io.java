package org.ldpstream.sdk;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;

/** Small helpers instead of Java 9–11 library calls, so the SDK runs on Android API 26+. */
final class Io {
  private Io() {}

  static byte[] readAll(InputStream in) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    byte[] buf = new byte[8192];
    int n;
    while ((n = in.read(buf)) > 0) {
      out.write(buf, 0, n);
    }
    return out.toByteArray();
  }

  static void put(ByteArrayOutputStream out, byte[] b) {
    out.write(b, 0, b.length);
  }

  static String zeros(int n) {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < n; i++) {
      b.append('0');
    }
    return b.toString();
  }
}
