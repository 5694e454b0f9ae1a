package org.ldpstream.sdk;

import java.security.SecureRandom;

/** Words from the platform CSPRNG ({@link SecureRandom}), fetched 1 KiB at a time. */
public final class SecureRandomSource implements DrawSource {
  private final SecureRandom random;
  private final byte[] buf = new byte[1024];
  private int at = buf.length;

  public SecureRandomSource() {
    this(new SecureRandom());
  }

  public SecureRandomSource(SecureRandom random) {
    this.random = random;
  }

  @Override
  public long nextU32() {
    if (at >= buf.length) {
      random.nextBytes(buf);
      at = 0;
    }
    long w = (buf[at] & 0xffL) | (buf[at + 1] & 0xffL) << 8 | (buf[at + 2] & 0xffL) << 16
        | (buf[at + 3] & 0xffL) << 24;
    at += 4;
    return w;
  }
}
