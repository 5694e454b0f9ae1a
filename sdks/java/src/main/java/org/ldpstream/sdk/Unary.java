package org.ldpstream.sdk;

import static org.ldpstream.sdk.Draws.bernoulli;
import static org.ldpstream.sdk.Draws.uniform;
import static org.ldpstream.sdk.Mechanisms.report;
import static org.ldpstream.sdk.Mechanisms.toArray;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

final class Unary extends AbstractOracle implements Rerandomizer {
  final int d;
  final double p;
  final double q;
  double p1;
  double q1;

  Unary(String mech, double eps, int d) {
    super(mech);
    this.d = d;
    double[] pq = probs(mech, eps);
    p = pq[0];
    q = pq[1];
    columns.add(new Column("bits", "uint8", d));
  }

  static double[] probs(String mech, double eps) {
    if ("sue".equals(mech)) {
      double h = Math.exp(eps / 2);
      return new double[] {h / (h + 1), 1 / (h + 1)};
    }
    return new double[] {0.5, 1 / (Math.exp(eps) + 1)};
  }

  @Override
  public Map<String, Object> perturb(long v, DrawSource src) {
    List<Integer> bits = new ArrayList<>();
    for (int i = 0; i < d; i++) {
      if (bernoulli(src, i == v ? p : q)) {
        bits.add(i);
      }
    }
    return report("bits", toArray(bits));
  }

  void instant(double eps1) {
    double[] pq = probs(mechanism, eps1);
    p1 = pq[0];
    q1 = pq[1];
  }

  @Override
  public Map<String, Object> rerandomize(Map<String, Object> z, DrawSource src) {
    boolean[] set = new boolean[d];
    for (int i : (int[]) z.get("bits")) {
      set[i] = true;
    }
    List<Integer> bits = new ArrayList<>();
    for (int i = 0; i < d; i++) {
      if (uniform(src) < (set[i] ? p1 : q1)) {
        bits.add(i);
      }
    }
    return report("bits", toArray(bits));
  }
}
