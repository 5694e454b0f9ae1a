package org.ldpstream.sdk;

/** The three draw primitives every mechanism uses (docs/wire-format.md §4). */
final class Draws {
  private static final double TWO53 = 9007199254740992.0;
  private static final long TWO32 = 1L << 32;

  private Draws() {}

  /** A float64 uniform on [0, 1): ((a >>> 5) * 2^26 + (b >>> 6)) / 2^53. */
  public static double uniform(DrawSource src) {
    long a = src.nextU32() >>> 5;
    long b = src.nextU32() >>> 6;
    return (a * 67108864L + b) / TWO53;
  }

  /** A uniform integer in [0, n), 1 <= n <= 2^32, by rejection (at least one word). */
  public static long below(DrawSource src, long n) {
    if (n < 1 || n > TWO32) {
      throw new IllegalArgumentException("n must be an integer in [1, 2^32], got " + n);
    }
    long limit = (TWO32 / n) * n;
    while (true) {
      long w = src.nextU32();
      if (w < limit) {
        return w % n;
      }
    }
  }

  /** True with probability p: uniform() &lt; p. */
  public static boolean bernoulli(DrawSource src, double p) {
    return uniform(src) < p;
  }
}
