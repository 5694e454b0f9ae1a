package org.ldpstream.sdk;

import java.nio.charset.Charset;
import java.security.GeneralSecurityException;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The word stream of a permanent answer (docs/wire-format.md, "Permanent answers";
 * ldpcore.reference.PermanentWords): seed = HMAC-SHA256(secret, "ldpstream/prr/v1" 0x00
 * fingerprint 0x00 key), block i = HMAC-SHA256(seed, u32be(i)), read as little-endian words.
 */
final class PermanentWords implements DrawSource {
  private static final Charset UTF8 = Charset.forName("UTF-8");
  private final Mac blocks;
  private int block;
  private byte[] buf = new byte[0];
  private int at;

  PermanentWords(byte[] secret, String fingerprint, String key) {
    if (secret.length < 16 || secret.length > 64) {
      throw new IllegalArgumentException("a device secret must be 16 to 64 bytes");
    }
    byte[] msg = ("ldpstream/prr/v1\u0000" + fingerprint + "\u0000" + key).getBytes(UTF8);
    blocks = hmac(hmac(secret).doFinal(msg));
  }

  static Mac hmac(byte[] key) {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(key, "HmacSHA256"));
      return mac;
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 is not available", e);
    }
  }

  @Override
  public long nextU32() {
    if (at >= buf.length) {
      int i = block++;
      buf = blocks.doFinal(new byte[] {(byte) (i >>> 24), (byte) (i >>> 16), (byte) (i >>> 8),
          (byte) i});
      at = 0;
    }
    long w = (buf[at] & 0xffL) | (buf[at + 1] & 0xffL) << 8 | (buf[at + 2] & 0xffL) << 16
        | (buf[at + 3] & 0xffL) << 24;
    at += 4;
    return w;
  }
}
