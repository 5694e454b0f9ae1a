package org.ldpstream.sdk;

import static org.ldpstream.sdk.Draws.bernoulli;
import static org.ldpstream.sdk.Mechanisms.col;
import static org.ldpstream.sdk.Mechanisms.dithered;
import static org.ldpstream.sdk.Mechanisms.report;

import java.util.Map;

final class Duchi extends AbstractOracle {
  final long bins;
  final double e;

  Duchi(double eps, long bins) {
    super("duchi");
    this.bins = bins;
    e = Math.exp(eps);
    columns.add(col("y", "uint8"));
  }

  @Override
  public Map<String, Object> perturb(long v, DrawSource src) {
    double t = 2 * dithered(v, bins, src) - 1;
    return report("y", bernoulli(src, ((e - 1) * t + e + 1) / (2 * (e + 1))) ? 1L : 0L);
  }
}
