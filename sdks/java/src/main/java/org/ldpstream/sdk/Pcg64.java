package org.ldpstream.sdk;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

/** numpy's SeedSequence + PCG64 (the public hash pool of PEM) and PEM's prefix schedule. */
final class Pcg64 {
  private Pcg64() {}

  // ---- PEM: numpy's SeedSequence + PCG64 for the public hash pool -----------------------
  private static final BigInteger M64 = BigInteger.ONE.shiftLeft(64).subtract(BigInteger.ONE);

  private static final BigInteger M128 = BigInteger.ONE.shiftLeft(128).subtract(BigInteger.ONE);

  private static final BigInteger PCG_MULT = new BigInteger("2360ED051FC65DA44385DF649FCCF645", 16);

  private static int[] seedSequence(long seed, int n) {
    List<Integer> entropy = new ArrayList<>();
    long s = seed;
    do {
      entropy.add((int) (s & 0xffffffffL));
      s >>>= 32;
    } while (s != 0);
    final int[] hashConst = {0x43b0d7e5};
    int[] pool = new int[4];
    for (int i = 0; i < 4; i++) {
      pool[i] = hashmix(hashConst, i < entropy.size() ? entropy.get(i) : 0);
    }
    for (int a = 0; a < 4; a++) {
      for (int b = 0; b < 4; b++) {
        if (a != b) {
          pool[b] = mix(pool[b], hashmix(hashConst, pool[a]));
        }
      }
    }
    for (int a = 4; a < entropy.size(); a++) {
      for (int b = 0; b < 4; b++) {
        pool[b] = mix(pool[b], hashmix(hashConst, entropy.get(a)));
      }
    }
    int hc = 0x8b51f9dd;
    int[] out = new int[n];
    for (int i = 0; i < n; i++) {
      int v = pool[i % 4] ^ hc;
      hc *= 0x58f38ded;
      v *= hc;
      out[i] = v ^ (v >>> 16);
    }
    return out;
  }

  private static int hashmix(int[] hashConst, int value) {
    value ^= hashConst[0];
    hashConst[0] *= 0x931e8875;
    value *= hashConst[0];
    return value ^ (value >>> 16);
  }

  private static int mix(int x, int y) {
    int r = 0xca01f9dd * x - 0x4973f715 * y;
    return r ^ (r >>> 16);
  }

  /** The first {@code count} outputs of numpy.random.default_rng(seed) (PCG64). */
  static long[] pcg64Words(long seed, int count) {
    int[] w = seedSequence(seed, 8);
    BigInteger[] v = new BigInteger[4];
    for (int i = 0; i < 4; i++) {
      v[i] = BigInteger.valueOf(((w[2 * i + 1] & 0xffffffffL) << 32) | (w[2 * i] & 0xffffffffL))
          .and(M64);
      if (v[i].signum() < 0) {
        v[i] = v[i].add(BigInteger.ONE.shiftLeft(64));
      }
    }
    BigInteger initState = v[0].shiftLeft(64).or(v[1]);
    BigInteger inc = v[2].shiftLeft(64).or(v[3]).shiftLeft(1).or(BigInteger.ONE).and(M128);
    BigInteger state = inc.add(initState).and(M128);
    state = state.multiply(PCG_MULT).add(inc).and(M128);
    long[] out = new long[count];
    for (int i = 0; i < count; i++) {
      state = state.multiply(PCG_MULT).add(inc).and(M128);
      long hi = state.shiftRight(64).longValue();
      long lo = state.longValue();
      out[i] = Long.rotateRight(hi ^ lo, (int) (hi >>> 58));
    }
    return out;
  }

  /** PEM's prefix schedule (ldpcore.heavy.pem.pem_schedule). */
  static List<Integer> pemSchedule(int bits, int keep, int eta) {
    int log2keep = 0;
    while ((1L << log2keep) < keep) {
      log2keep++;
    }
    int s0 = Math.min(bits, eta + log2keep);
    List<Integer> out = new ArrayList<>();
    if (s0 == bits) {
      out.add(bits);
      return out;
    }
    int steps = (bits - s0 + eta - 1) / eta;
    int inc = (bits - s0 + steps - 1) / steps;
    TreeSet<Integer> set = new TreeSet<>();
    for (int i = 0; i < steps; i++) {
      set.add(s0 + i * inc);
    }
    set.add(bits);
    out.addAll(set);
    return out;
  }
}
