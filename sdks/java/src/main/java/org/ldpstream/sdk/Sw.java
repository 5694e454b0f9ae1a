package org.ldpstream.sdk;

import static org.ldpstream.sdk.Draws.bernoulli;
import static org.ldpstream.sdk.Draws.uniform;
import static org.ldpstream.sdk.Mechanisms.col;
import static org.ldpstream.sdk.Mechanisms.dithered;
import static org.ldpstream.sdk.Mechanisms.report;

import java.util.Map;

final class Sw extends AbstractOracle {
  final long bins;
  final double b;
  final long outBins;
  final double p;

  Sw(double eps, long bins, double b, long outBins) {
    super("sw");
    this.bins = bins;
    this.b = b;
    this.outBins = outBins;
    double e = Math.exp(eps);
    p = e / (2 * b * e + 1);
    columns.add(col("y", "uint16"));
  }

  @Override
  public Map<String, Object> perturb(long v, DrawSource src) {
    double u = dithered(v, bins, src);
    boolean near = bernoulli(src, 2 * b * p);
    double t = uniform(src);
    double y = near ? u - b + 2 * b * t : (t < u ? -b + t : b + t);
    double idx = Math.floor((y + b) / (1 + 2 * b) * outBins);
    return report("y", (long) Math.min(Math.max(idx, 0), outBins - 1));
  }
}
