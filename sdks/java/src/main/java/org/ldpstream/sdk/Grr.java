package org.ldpstream.sdk;

import static org.ldpstream.sdk.Mechanisms.col;
import static org.ldpstream.sdk.Mechanisms.grrLike;
import static org.ldpstream.sdk.Mechanisms.report;
import static org.ldpstream.sdk.Mechanisms.u16or32;

import java.util.Map;

final class Grr extends AbstractOracle implements Rerandomizer {
  final long d;
  final double p;
  double p1;

  Grr(double eps, long d) {
    super("grr");
    this.d = d;
    double e = Math.exp(eps);
    p = e / (e + d - 1);
    columns.add(col("y", u16or32(d)));
  }

  @Override
  public Map<String, Object> perturb(long v, DrawSource src) {
    return report("y", grrLike(src, v, d, p));
  }

  void instant(double eps1) {
    double e1 = Math.exp(eps1);
    p1 = e1 / (e1 + d - 1);
  }

  @Override
  public Map<String, Object> rerandomize(Map<String, Object> z, DrawSource src) {
    return report("y", grrLike(src, (Long) z.get("y"), d, p1));
  }
}
