package org.ldpstream.sdk;

import static org.ldpstream.sdk.Draws.below;
import static org.ldpstream.sdk.Draws.bernoulli;
import static org.ldpstream.sdk.Mechanisms.col;
import static org.ldpstream.sdk.Mechanisms.nextPow2;
import static org.ldpstream.sdk.Mechanisms.parity;
import static org.ldpstream.sdk.Mechanisms.report;
import static org.ldpstream.sdk.Mechanisms.u16or32;

import java.util.Map;

final class Hr extends AbstractOracle {
  final long k;
  final double p;

  Hr(double eps, long d) {
    super("hr");
    k = nextPow2(d + 1);
    double e = Math.exp(eps);
    p = e / (e + 1);
    columns.add(col("y", u16or32(k)));
  }

  @Override
  public Map<String, Object> perturb(long v, DrawSource src) {
    long row = v + 1;
    long z = below(src, k);
    boolean want = bernoulli(src, p);
    boolean inside = parity(row & z) == 0;
    return report("y", inside == want ? z : z ^ (row & -row));
  }
}
