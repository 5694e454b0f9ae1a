package org.ldpstream.sdk;

import static org.ldpstream.sdk.Pcg64.pcg64Words;
import static org.ldpstream.sdk.Pcg64.pemSchedule;

import static org.ldpstream.sdk.Draws.below;
import static org.ldpstream.sdk.Mechanisms.col;
import static org.ldpstream.sdk.Mechanisms.grrLike;
import static org.ldpstream.sdk.Mechanisms.report;

import java.util.List;
import java.util.Map;

final class Pem extends AbstractOracle {
  final int bits;
  final int pool;
  final long hashSeed;
  final List<Integer> lengths;
  final long g;
  final double p;
  private long[] mult;
  private long[] off;

  Pem(double eps, int bits, int keep, int eta, int pool, long hashSeed) {
    super("pem");
    this.bits = bits;
    this.pool = pool;
    this.hashSeed = hashSeed;
    lengths = pemSchedule(bits, keep, eta);
    double e = Math.exp(eps);
    int groups = lengths.size();
    long gCap = Math.max(2, Math.min(1 << 16, (1L << 26) / ((long) groups * pool)));
    g = Math.min(gCap, Math.max(2, Math.round(Math.rint(e + 1))));
    p = e / (e + g - 1);
    columns.add(col("group", "uint8"));
    columns.add(col("seed", "uint16"));
    columns.add(col("y", "uint16"));
  }

  private synchronized void ensurePool() {
    if (mult != null) {
      return;
    }
    int n = lengths.size() * pool;
    long[] words = pcg64Words(hashSeed, 2 * n);
    long[] a = new long[n];
    long[] b = new long[n];
    for (int i = 0; i < n; i++) {
      a[i] = words[i] | 1L;
      b[i] = words[n + i] >>> 1;
    }
    off = b;
    mult = a;
  }

  @Override
  public Map<String, Object> perturb(long v, DrawSource src) {
    ensurePool();
    if (v < 0 || (bits < 63 && v >= (1L << bits))) {
      throw new IllegalArgumentException("pem values must be integers in [0, 2^" + bits + ")");
    }
    long group = below(src, lengths.size());
    long seed = below(src, pool);
    long prefix = v >>> (bits - lengths.get((int) group));
    int i = (int) (group * pool + seed);
    long x = mult[i] * prefix + off[i];
    long h = ((x >>> 32) * g) >>> 32;
    return report("group", group, "seed", seed, "y", grrLike(src, h, g, p));
  }
}
