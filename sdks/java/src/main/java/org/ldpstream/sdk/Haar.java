package org.ldpstream.sdk;

import static org.ldpstream.sdk.Draws.below;
import static org.ldpstream.sdk.Draws.bernoulli;
import static org.ldpstream.sdk.Mechanisms.col;
import static org.ldpstream.sdk.Mechanisms.nextPow2;
import static org.ldpstream.sdk.Mechanisms.parity;
import static org.ldpstream.sdk.Mechanisms.report;
import static org.ldpstream.sdk.Mechanisms.u16or32;

import java.util.Map;

final class Haar extends AbstractOracle {
  final long padded;
  final int height;
  final double p;

  Haar(double eps, long d) {
    super("haar");
    padded = nextPow2(d);
    height = Long.numberOfTrailingZeros(padded);
    double e = Math.exp(eps);
    p = e / (e + 1);
    columns.add(col("level", "uint8"));
    columns.add(col("j", u16or32(Math.max(1, padded / 2))));
    columns.add(col("b", "uint8"));
  }

  @Override
  public Map<String, Object> perturb(long v, DrawSource src) {
    long level = 1 + below(src, height);
    long j = below(src, padded >> level);
    long node = v >> level;
    long right = (v >> (level - 1)) & 1;
    long negative = parity(j & node) ^ right;
    return report("level", level, "j", j, "b", negative ^ (bernoulli(src, p) ? 0 : 1));
  }
}
