package org.ldpstream.sdk;

import static org.ldpstream.sdk.Mechanisms.primitivePoly;
import static org.ldpstream.sdk.Draws.below;
import static org.ldpstream.sdk.Draws.bernoulli;
import static org.ldpstream.sdk.Draws.uniform;
import static org.ldpstream.sdk.Mechanisms.col;
import static org.ldpstream.sdk.Mechanisms.parity;
import static org.ldpstream.sdk.Mechanisms.pow;
import static org.ldpstream.sdk.Mechanisms.report;
import static org.ldpstream.sdk.Mechanisms.toArray;
import static org.ldpstream.sdk.Mechanisms.u16or32;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

final class Sketch extends AbstractOracle {
  final long m;
  final int r;
  final long k;
  final int poly;
  final double flip;
  final double keep;

  Sketch(String mech, double eps, long d, long m) {
    super(mech);
    this.m = m;
    int rr = 1;
    while (pow(m, rr) < d) {
      rr++;
    }
    r = rr;
    k = (pow(m, r) - 1) / (m - 1);
    poly = m > 2 && (m & (m - 1)) == 0 ? primitivePoly(Long.numberOfTrailingZeros(m)) : 0;
    columns.add(col("j", u16or32(k)));
    if ("cms".equals(mech)) {
      double h = Math.exp(eps / 2);
      flip = 1 / (h + 1);
      keep = 0;
      columns.add(new Column("bits", "uint8", (int) m));
    } else {
      double e = Math.exp(eps);
      keep = e / (e + 1);
      flip = 0;
      columns.add(col("l", u16or32(m)));
      columns.add(col("b", "uint8"));
    }
  }

  long mul(long a, long b) {
    if (poly == 0) {
      return a * b % m;
    }
    long out = 0;
    while (b != 0) {
      if ((b & 1) != 0) {
        out ^= a;
      }
      b >>= 1;
      a <<= 1;
      if ((a & m) != 0) {
        a ^= poly;
      }
    }
    return out;
  }

  /** h_j(x) over GF(m) with row j's point of PG(r-1, m). */
  long hash(long j, long x) {
    long[] pt = new long[r];
    for (int lead = 0; lead < r; lead++) {
      int tail = r - lead - 1;
      long size = pow(m, tail);
      if (j < size) {
        pt[lead] = 1;
        for (int t = 0; t < tail; t++) {
          pt[lead + 1 + t] = (j / pow(m, tail - 1 - t)) % m;
        }
        break;
      }
      j -= size;
    }
    long acc = 0;
    for (int i = 0; i < r; i++) {
      long prod = mul(pt[i], (x / pow(m, i)) % m);
      acc = poly != 0 ? acc ^ prod : (acc + prod) % m;
    }
    return acc;
  }

  @Override
  public Map<String, Object> perturb(long v, DrawSource src) {
    long j = below(src, k);
    long hot = hash(j, v);
    if ("cms".equals(mechanism)) {
      List<Integer> bits = new ArrayList<>();
      for (int i = 0; i < m; i++) {
        double w = uniform(src);
        if (i == hot ? w >= flip : w < flip) {
          bits.add(i);
        }
      }
      return report("j", j, "bits", toArray(bits));
    }
    long l = below(src, m);
    boolean flipped = !bernoulli(src, keep);
    return report("j", j, "l", l, "b", (long) (parity(l & hot) ^ (flipped ? 1 : 0)));
  }
}
