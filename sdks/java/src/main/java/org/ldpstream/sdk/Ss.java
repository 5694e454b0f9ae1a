package org.ldpstream.sdk;

import static org.ldpstream.sdk.Draws.below;
import static org.ldpstream.sdk.Draws.bernoulli;
import static org.ldpstream.sdk.Mechanisms.report;
import static org.ldpstream.sdk.Mechanisms.toArray;

import java.util.ArrayList;
import java.util.Map;
import java.util.TreeSet;

final class Ss extends AbstractOracle {
  final int d;
  final int k;
  final double p;

  Ss(double eps, int d, int k) {
    super("ss");
    this.d = d;
    this.k = k;
    double e = Math.exp(eps);
    p = k * e / (k * e + d - k);
    columns.add(new Column("bits", "uint8", d));
  }

  @Override
  public Map<String, Object> perturb(long v, DrawSource src) {
    TreeSet<Integer> chosen = new TreeSet<>();
    if (bernoulli(src, p)) {
      chosen.add((int) v);
    }
    while (chosen.size() < k) {
      long u = below(src, d - 1);
      if (u >= v) {
        u += 1;
      }
      chosen.add((int) u);
    }
    return report("bits", toArray(new ArrayList<>(chosen)));
  }
}
