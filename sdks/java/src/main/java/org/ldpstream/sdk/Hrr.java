package org.ldpstream.sdk;

import static org.ldpstream.sdk.Draws.below;
import static org.ldpstream.sdk.Draws.bernoulli;
import static org.ldpstream.sdk.Draws.uniform;
import static org.ldpstream.sdk.Mechanisms.col;
import static org.ldpstream.sdk.Mechanisms.nextPow2;
import static org.ldpstream.sdk.Mechanisms.parity;
import static org.ldpstream.sdk.Mechanisms.report;
import static org.ldpstream.sdk.Mechanisms.u16or32;

import java.util.Map;

final class Hrr extends RandomizedResponse {
  final long dd;

  Hrr(double eps, long d) {
    super("hrr", signKeep(eps));
    dd = nextPow2(d);
    columns.add(col("j", u16or32(dd)));
    columns.add(col("b", "uint8"));
  }

  @Override
  public Map<String, Object> perturb(long v, DrawSource src) {
    long j = below(src, dd);
    boolean flip = !bernoulli(src, p);
    return report("j", j, "b", (long) (parity(j & v) ^ (flip ? 1 : 0)));
  }

  @Override
  double keep(double eps) {
    return signKeep(eps);
  }

  /** The sign bit is binary randomized response: e^eps / (e^eps + 1). */
  private static double signKeep(double eps) {
    double e = Math.exp(eps);
    return e / (e + 1);
  }

  @Override
  public Map<String, Object> rerandomize(Map<String, Object> z, DrawSource src) {
    long b = (Long) z.get("b") ^ (uniform(src) >= p1 ? 1L : 0L);
    return report("j", z.get("j"), "b", b);
  }
}
