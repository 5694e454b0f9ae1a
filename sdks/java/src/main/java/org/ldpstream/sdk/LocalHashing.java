package org.ldpstream.sdk;

import static org.ldpstream.sdk.Mechanisms.MAX_STATE_CELLS_LH;
import static org.ldpstream.sdk.Draws.below;
import static org.ldpstream.sdk.Mechanisms.col;
import static org.ldpstream.sdk.Mechanisms.digitsNeeded;
import static org.ldpstream.sdk.Mechanisms.grrLike;
import static org.ldpstream.sdk.Mechanisms.nearestPrime;
import static org.ldpstream.sdk.Mechanisms.pow;
import static org.ldpstream.sdk.Mechanisms.report;
import static org.ldpstream.sdk.Mechanisms.u16or32;

import java.util.Map;

final class LocalHashing extends RandomizedResponse {
  final long g;
  final int r;
  final long nHashes;

  LocalHashing(String mech, double eps, long d, long g) {
    super(mech, keepOf(eps, g));
    this.g = g;
    r = digitsNeeded(g, d);
    nHashes = pow(g, r);
    columns.add(col("a", u16or32(nHashes)));
    columns.add(col("t", g <= 256 ? "uint8" : "uint16"));
  }

  static long defaultG(double eps, long d) {
    long g = nearestPrime(Math.exp(eps) + 1);
    while (g > 2 && pow(g, digitsNeeded(g, d) + 1) > MAX_STATE_CELLS_LH) {
      g = nearestPrime(g / 2.0);
    }
    return g;
  }

  long hash(long a, long x) {
    long acc = 0;
    for (int j = 0; j < r; j++) {
      acc += (a % g) * (x % g);
      a /= g;
      x /= g;
    }
    return acc % g;
  }

  @Override
  public Map<String, Object> perturb(long v, DrawSource src) {
    long a = below(src, nHashes);
    return report("a", a, "t", grrLike(src, hash(a, v), g, p));
  }

  @Override
  double keep(double eps) {
    return keepOf(eps, g);
  }

  @Override
  public Map<String, Object> rerandomize(Map<String, Object> z, DrawSource src) {
    return report("a", z.get("a"), "t", grrLike(src, (Long) z.get("t"), g, p1));
  }
}
