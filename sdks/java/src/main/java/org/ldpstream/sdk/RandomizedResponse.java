package org.ldpstream.sdk;

/**
 * An oracle that reports its answer (the value for GRR, the hashed value for OLH/BLH, the
 * sign bit for HRR) truthfully with probability {@code p = keep(epsilon)} and otherwise one
 * of the other answers. Under two-level memoization the instantaneous channel re-randomizes
 * the permanent answer the same way at {@code p1 = keep(epsilon_1)}: one formula per
 * mechanism serves both levels.
 */
abstract class RandomizedResponse extends AbstractOracle implements Rerandomizer {
  final double p;
  double p1;

  RandomizedResponse(String mechanism, double p) {
    super(mechanism);
    this.p = p;
  }

  /** The probability of reporting the true answer at privacy budget eps. */
  abstract double keep(double eps);

  /** Sets the instantaneous channel to epsilon_1. */
  final void instant(double eps1) {
    p1 = keep(eps1);
  }

  /** k-ary randomized response keeps the answer with e^eps / (e^eps + k - 1). */
  static double keepOf(double eps, long k) {
    double e = Math.exp(eps);
    return e / (e + k - 1);
  }
}
