package org.ldpstream.sdk;

import java.security.SecureRandom;

/**
 * Words from the platform CSPRNG ({@link SecureRandom}), fetched 4 KiB at a time.
 *
 * <p>The default constructor prefers the JDK's NIST SP 800-90A "DRBG" (Java 9+; seeded from
 * the OS, no lock on /dev/urandom per call) and falls back to {@code new SecureRandom()}
 * (Android: the OpenSSL-backed provider).
 */
final class SecureRandomSource implements DrawSource {
  private final SecureRandom random;
  private final byte[] buf = new byte[4096];
  private int at = buf.length;

  public SecureRandomSource() {
    this(platformDefault());
  }

  private static SecureRandom platformDefault() {
    try {
      return SecureRandom.getInstance("DRBG");
    } catch (java.security.NoSuchAlgorithmException e) {
      return new SecureRandom();
    }
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
