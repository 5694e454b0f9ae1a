package org.ldpstream.sdk;

import static org.ldpstream.sdk.Draws.bernoulli;
import static org.ldpstream.sdk.Draws.uniform;
import static org.ldpstream.sdk.Mechanisms.col;
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
    double t = 2 * ((v + uniform(src)) / bins) - 1;
    double left = (c + 1) / 2 * t - (c - 1) / 2;
    double right = left + c - 1;
    boolean band = bernoulli(src, pBand);
    double s = uniform(src);
    double y;
    if (band) {
      y = left + s * (c - 1);
    } else {
      double rest = s * (c + 1);
      y = rest < left + c ? -c + rest : right + (rest - (left + c));
    }
    double z = (y + c) / (2 * c) * 65536;
    double zi = Math.floor(z + uniform(src));
    return report("y", (long) Math.min(Math.max(zi, 0), 65536));
  }
}
