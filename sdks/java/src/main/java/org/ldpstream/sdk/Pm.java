package org.ldpstream.sdk;

import static org.ldpstream.sdk.Draws.bernoulli;
import static org.ldpstream.sdk.Draws.uniform;
import static org.ldpstream.sdk.Mechanisms.col;
import static org.ldpstream.sdk.Mechanisms.dithered;
import static org.ldpstream.sdk.Mechanisms.report;

import java.util.Map;

final class Pm extends AbstractOracle {
  final long bins;
  final double c;
  final double pBand;

  Pm(double eps, long bins) {
    super("pm");
    this.bins = bins;
    double h = Math.exp(eps / 2);
    c = (h + 1) / (h - 1);
    pBand = h / (h + 1);
    columns.add(col("y", "uint32"));
  }

  @Override
  public Map<String, Object> perturb(long v, DrawSource src) {
    double t = 2 * dithered(v, bins, src) - 1;
    return report("y", onGrid(piecewise(t, src), src));
  }

  /**
   * PM's output for t in [-1, 1]: uniform on the band [l(t), l(t) + C - 1] with probability
   * pBand, else uniform on the rest of [-C, C], l(t) = (C + 1)/2 t - (C - 1)/2.
   */
  private double piecewise(double t, DrawSource src) {
    double left = (c + 1) / 2 * t - (c - 1) / 2;
    if (bernoulli(src, pBand)) {
      return left + uniform(src) * (c - 1);
    }
    double below = left + c; // the length of [-C, left); the rest has length C + 1
    double at = uniform(src) * (c + 1);
    return at < below ? -c + at : (below - 1) + (at - below);
  }

  /** y in [-C, C] on the column's grid 0 .. 2^16, rounded at random (so without bias). */
  private long onGrid(double y, DrawSource src) {
    double z = (y + c) / (2 * c) * 65536;
    return (long) Math.min(Math.max(Math.floor(z + uniform(src)), 0), 65536);
  }
}
