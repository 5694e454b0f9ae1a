package org.ldpstream.sdk;

import static org.ldpstream.sdk.Mechanisms.col;
import static org.ldpstream.sdk.Mechanisms.grrLike;
import static org.ldpstream.sdk.Mechanisms.report;
import static org.ldpstream.sdk.Mechanisms.u16or32;

import java.util.Map;

final class Grr extends RandomizedResponse {
  final long d;

  Grr(double eps, long d) {
    super("grr", keepOf(eps, d));
    this.d = d;
    columns.add(col("y", u16or32(d)));
  }

  @Override
  double keep(double eps) {
    return keepOf(eps, d);
  }

  @Override
  public Map<String, Object> perturb(long v, DrawSource src) {
    return report("y", grrLike(src, v, d, p));
  }

  @Override
  public Map<String, Object> rerandomize(Map<String, Object> z, DrawSource src) {
    return report("y", grrLike(src, (Long) z.get("y"), d, p1));
  }
}
