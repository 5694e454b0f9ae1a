package org.ldpstream.sdk;

import static org.ldpstream.sdk.Draws.below;
import static org.ldpstream.sdk.Draws.bernoulli;
import static org.ldpstream.sdk.Draws.uniform;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Every mechanism a collection can declare: report layout and reference perturbation
 * (docs/wire-format.md §3–4), built from the resolved oracle spec a collection serves.
 *
 * <p>A report is a {@code Map<String, Object>} in column order: a scalar column holds a
 * {@link Long}, a bitmask column an {@code int[]} of the ascending indices of its 1 bits.
 */
public final class Mechanisms {
  private Mechanisms() {}

  /** One report column: a scalar, or a bitmask of {@code bits} bits when bits &gt; 0. */
  public static final class Column {
    public final String name;
    public final String dtype;
    public final int bits;

    Column(String name, String dtype, int bits) {
      this.name = name;
      this.dtype = dtype;
      this.bits = bits;
    }

    /** Bytes per report in the binary batch. */
    public int perReport() {
      if (bits > 0) {
        return (bits + 7) / 8;
      }
      return "uint8".equals(dtype) ? 1 : "uint16".equals(dtype) ? 2 : 4;
    }
  }

  /** A mechanism's device side. */
  public interface Oracle {
    String mechanism();

    List<Column> columns();

    /** The report of a domain index (for pem an integer below 2^bits). */
    Map<String, Object> perturb(long value, DrawSource src);

    /**
     * The report of several indices: for ps, psi and setsize a set of item indices, for
     * multi one index per attribute; for the other mechanisms a single index.
     */
    default Map<String, Object> perturbItems(long[] values, DrawSource src) {
      if (values.length != 1) {
        throw new IllegalArgumentException(mechanism() + " takes one domain index");
      }
      return perturb(values[0], src);
    }
  }

  /** The instantaneous channel of two-level memoization. */
  public interface Rerandomizer {
    Map<String, Object> rerandomize(Map<String, Object> permanent, DrawSource src);
  }

  /** Mechanisms that admit two-level memoization. */
  public static final List<String> TWO_LEVEL_MECHANISMS =
      Arrays.asList("grr", "sue", "oue", "olh", "blh", "hrr");

  private static final int MAX_STATE_CELLS_LH = 1 << 24;

  static Column col(String name, String dtype) {
    return new Column(name, dtype, 0);
  }

  static String u16or32(long n) {
    return n <= 65536 ? "uint16" : "uint32";
  }

  static long pow(long b, int e) {
    long r = 1;
    for (int i = 0; i < e; i++) {
      r *= b;
    }
    return r;
  }

  static int parity(long x) {
    return Long.bitCount(x) & 1;
  }

  static long nextPow2(long x) {
    long p = 1;
    while (p < x) {
      p *= 2;
    }
    return p;
  }

  static boolean isPrime(long x) {
    if (x < 2) {
      return false;
    }
    if (x % 2 == 0) {
      return x == 2;
    }
    for (long f = 3; f * f <= x; f += 2) {
      if (x % f == 0) {
        return false;
      }
    }
    return true;
  }

  /** The prime nearest x (the smaller on a tie), at least 2. */
  static long nearestPrime(double x) {
    long lo = Math.max(2, (long) Math.floor(x));
    while (!isPrime(lo) && lo > 2) {
      lo--;
    }
    long hi = Math.max(2, (long) Math.ceil(x));
    while (!isPrime(hi)) {
      hi++;
    }
    return x - lo <= hi - x ? lo : hi;
  }

  static int digitsNeeded(long g, long d) {
    int r = 1;
    while (pow(g, r) < d) {
      r++;
    }
    return r;
  }

  static long grrLike(DrawSource src, long v, long k, double p) {
    if (bernoulli(src, p)) {
      return v;
    }
    return (v + 1 + below(src, k - 1)) % k;
  }

  static Map<String, Object> report(Object... kv) {
    Map<String, Object> out = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      out.put((String) kv[i], kv[i + 1]);
    }
    return out;
  }

  static int[] toArray(List<Integer> l) {
    int[] a = new int[l.size()];
    for (int i = 0; i < a.length; i++) {
      a[i] = l.get(i);
    }
    return a;
  }

  abstract static class Base implements Oracle {
    final String mechanism;
    final List<Column> columns = new ArrayList<>();

    Base(String mechanism) {
      this.mechanism = mechanism;
    }

    @Override
    public String mechanism() {
      return mechanism;
    }

    @Override
    public List<Column> columns() {
      return columns;
    }
  }

  static final class Grr extends Base implements Rerandomizer {
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

  static final class Unary extends Base implements Rerandomizer {
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

  static final class LocalHashing extends Base implements Rerandomizer {
    final long g;
    final int r;
    final long nHashes;
    final double p;
    double p1;

    LocalHashing(String mech, double eps, long d, long g) {
      super(mech);
      this.g = g;
      r = digitsNeeded(g, d);
      nHashes = pow(g, r);
      double e = Math.exp(eps);
      p = e / (e + g - 1);
      columns.add(col("a", u16or32(nHashes)));
      columns.add(col("t", g <= 256 ? "uint8" : "uint16"));
    }

    static long defaultG(double eps, long d) {
      long g = nearestPrime(Math.exp(eps) + 1);
      while (g > 2 && pow(g, digitsNeeded(g, d) + 1) > MAX_STATE_CELLS_LH) {
        g = nearestPrime(g / 2.0);
      }
      return g;
    }

    long hash(long a, long x) {
      long acc = 0;
      for (int j = 0; j < r; j++) {
        acc += (a % g) * (x % g);
        a /= g;
        x /= g;
      }
      return acc % g;
    }

    @Override
    public Map<String, Object> perturb(long v, DrawSource src) {
      long a = below(src, nHashes);
      return report("a", a, "t", grrLike(src, hash(a, v), g, p));
    }

    void instant(double eps1) {
      double e1 = Math.exp(eps1);
      p1 = e1 / (e1 + g - 1);
    }

    @Override
    public Map<String, Object> rerandomize(Map<String, Object> z, DrawSource src) {
      return report("a", z.get("a"), "t", grrLike(src, (Long) z.get("t"), g, p1));
    }
  }

  static final class Hr extends Base {
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

  static final class Hrr extends Base implements Rerandomizer {
    final long dd;
    final double p;
    double p1;

    Hrr(double eps, long d) {
      super("hrr");
      dd = nextPow2(d);
      double e = Math.exp(eps);
      p = e / (e + 1);
      columns.add(col("j", u16or32(dd)));
      columns.add(col("b", "uint8"));
    }

    @Override
    public Map<String, Object> perturb(long v, DrawSource src) {
      long j = below(src, dd);
      boolean flip = !bernoulli(src, p);
      return report("j", j, "b", (long) (parity(j & v) ^ (flip ? 1 : 0)));
    }

    void instant(double eps1) {
      double e1 = Math.exp(eps1);
      p1 = e1 / (e1 + 1);
    }

    @Override
    public Map<String, Object> rerandomize(Map<String, Object> z, DrawSource src) {
      long b = (Long) z.get("b") ^ (uniform(src) >= p1 ? 1L : 0L);
      return report("j", z.get("j"), "b", b);
    }
  }

  static final class Ss extends Base {
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

  /** The smallest primitive polynomial of degree b over GF(2) (ldpcore/_field.py). */
  static int primitivePoly(int b) {
    int q = 1 << b;
    for (int poly = q | 1; poly < 2 * q; poly += 2) {
      int x = 1;
      int seen = 0;
      for (int i = 0; i < q - 1; i++) {
        x <<= 1;
        if ((x & q) != 0) {
          x ^= poly;
        }
        seen++;
        if (x == 1) {
          break;
        }
      }
      if (x == 1 && seen == q - 1) {
        return poly;
      }
    }
    throw new IllegalStateException("no primitive polynomial of degree " + b);
  }

  static final class Sketch extends Base {
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

  static final class Hh extends Base {
    final long fanout;
    final int height;
    final List<Oracle> levels = new ArrayList<>();

    Hh(double eps, long d, long fanout, String base) {
      super("hh");
      this.fanout = fanout;
      int h = 1;
      while (pow(fanout, h) < d) {
        h++;
      }
      height = h;
      for (int lv = 1; lv <= h; lv++) {
        Map<String, Object> spec = new LinkedHashMap<>();
        spec.put("mechanism", base);
        spec.put("epsilon", eps);
        spec.put("domain_size", pow(fanout, lv));
        levels.add(make(spec));
      }
      columns.add(col("level", "uint8"));
      columns.addAll(levels.get(h - 1).columns());
    }

    @Override
    public Map<String, Object> perturb(long v, DrawSource src) {
      long level = 1 + below(src, height);
      long node = v / pow(fanout, height - (int) level);
      Map<String, Object> out = report("level", level);
      out.putAll(levels.get((int) level - 1).perturb(node, src));
      return out;
    }
  }

  static final class Haar extends Base {
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

  static final class Sw extends Base {
    final long bins;
    final double b;
    final long outBins;
    final double p;

    Sw(double eps, long bins, double b, long outBins) {
      super("sw");
      this.bins = bins;
      this.b = b;
      this.outBins = outBins;
      double e = Math.exp(eps);
      p = e / (2 * b * e + 1);
      columns.add(col("y", "uint16"));
    }

    @Override
    public Map<String, Object> perturb(long v, DrawSource src) {
      double u = (v + uniform(src)) / bins;
      boolean near = bernoulli(src, 2 * b * p);
      double t = uniform(src);
      double y = near ? u - b + 2 * b * t : (t < u ? -b + t : b + t);
      double idx = Math.floor((y + b) / (1 + 2 * b) * outBins);
      return report("y", (long) Math.min(Math.max(idx, 0), outBins - 1));
    }
  }

  static final class Pm extends Base {
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

  static final class Duchi extends Base {
    final long bins;
    final double e;

    Duchi(double eps, long bins) {
      super("duchi");
      this.bins = bins;
      e = Math.exp(eps);
      columns.add(col("y", "uint8"));
    }

    @Override
    public Map<String, Object> perturb(long v, DrawSource src) {
      double t = 2 * ((v + uniform(src)) / bins) - 1;
      return report("y", bernoulli(src, ((e - 1) * t + e + 1) / (2 * (e + 1))) ? 1L : 0L);
    }
  }

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
    java.util.function.IntUnaryOperator hashmix = value -> {
      value ^= hashConst[0];
      hashConst[0] *= 0x931e8875;
      value *= hashConst[0];
      return value ^ (value >>> 16);
    };
    int[] pool = new int[4];
    for (int i = 0; i < 4; i++) {
      pool[i] = hashmix.applyAsInt(i < entropy.size() ? entropy.get(i) : 0);
    }
    for (int a = 0; a < 4; a++) {
      for (int b = 0; b < 4; b++) {
        if (a != b) {
          pool[b] = mix(pool[b], hashmix.applyAsInt(pool[a]));
        }
      }
    }
    for (int a = 4; a < entropy.size(); a++) {
      for (int b = 0; b < 4; b++) {
        pool[b] = mix(pool[b], hashmix.applyAsInt(entropy.get(a)));
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

  private static int mix(int x, int y) {
    int r = 0xca01f9dd * x - 0x4973f715 * y;
    return r ^ (r >>> 16);
  }

  /** The first {@code count} outputs of numpy.random.default_rng(seed) (PCG64). */
  public static long[] pcg64Words(long seed, int count) {
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
  public static List<Integer> pemSchedule(int bits, int keep, int eta) {
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

  static final class Pem extends Base {
    final int bits;
    final int pool;
    final long hashSeed;
    final List<Integer> lengths;
    final long g;
    final double p;
    private long[] mult;
    private long[] off;

    Pem(double eps, int bits, int keep, int eta, int pool, long hashSeed) {
      super("pem");
      this.bits = bits;
      this.pool = pool;
      this.hashSeed = hashSeed;
      lengths = pemSchedule(bits, keep, eta);
      double e = Math.exp(eps);
      int groups = lengths.size();
      long gCap = Math.max(2, Math.min(1 << 16, (1L << 26) / ((long) groups * pool)));
      g = Math.min(gCap, Math.max(2, Math.round(Math.rint(e + 1))));
      p = e / (e + g - 1);
      columns.add(col("group", "uint8"));
      columns.add(col("seed", "uint16"));
      columns.add(col("y", "uint16"));
    }

    private synchronized void ensurePool() {
      if (mult != null) {
        return;
      }
      int n = lengths.size() * pool;
      long[] words = pcg64Words(hashSeed, 2 * n);
      long[] a = new long[n];
      long[] b = new long[n];
      for (int i = 0; i < n; i++) {
        a[i] = words[i] | 1L;
        b[i] = words[n + i] >>> 1;
      }
      off = b;
      mult = a;
    }

    @Override
    public Map<String, Object> perturb(long v, DrawSource src) {
      ensurePool();
      if (v < 0 || (bits < 63 && v >= (1L << bits))) {
        throw new IllegalArgumentException("pem values must be integers in [0, 2^" + bits + ")");
      }
      long group = below(src, lengths.size());
      long seed = below(src, pool);
      long prefix = v >>> (bits - lengths.get((int) group));
      int i = (int) (group * pool + seed);
      long x = mult[i] * prefix + off[i];
      long h = ((x >>> 32) * g) >>> 32;
      return report("group", group, "seed", seed, "y", grrLike(src, h, g, p));
    }
  }

  static double num(Map<String, Object> spec, String key) {
    Object v = spec.get(key);
    if (!(v instanceof Number)) {
      throw new IllegalArgumentException("oracle." + key + " must be a number, got " + v);
    }
    return ((Number) v).doubleValue();
  }

  static long integer(Map<String, Object> spec, String key, long dflt) {
    Object v = spec.get(key);
    if (v == null) {
      return dflt;
    }
    if (!(v instanceof Long || v instanceof Integer)) {
      throw new IllegalArgumentException("oracle." + key + " must be an integer, got " + v);
    }
    return ((Number) v).longValue();
  }

  /** The oracle of a resolved oracle spec ({@code collection.oracle}). */
  public static Oracle make(Map<String, Object> spec) {
    Object mech = spec.get("mechanism");
    double eps = num(spec, "epsilon");
    if ("pem".equals(mech)) {
      return new Pem(eps, (int) integer(spec, "bits", -1), (int) integer(spec, "keep", 64),
          (int) integer(spec, "eta", 8), (int) integer(spec, "pool", 256),
          integer(spec, "hash_seed", 0));
    }
    if ("multi".equals(mech)) {
      return new Multi(eps, spec);
    }
    long d = integer(spec, "domain_size", -1);
    if (d < 2) {
      throw new IllegalArgumentException("oracle.domain_size must be an integer >= 2");
    }
    switch (String.valueOf(mech)) {
      case "grr": return new Grr(eps, d);
      case "sue": case "oue": return new Unary((String) mech, eps, (int) d);
      case "blh": return new LocalHashing("blh", eps, d, 2);
      case "olh": return new LocalHashing("olh", eps, d,
          spec.containsKey("g") ? integer(spec, "g", 0) : LocalHashing.defaultG(eps, d));
      case "hr": return new Hr(eps, d);
      case "hrr": return new Hrr(eps, d);
      case "ss": {
        double e = Math.exp(eps);
        long k = spec.containsKey("subset_size") ? integer(spec, "subset_size", -1)
            : Math.min(d - 1, Math.max(1, (long) Math.rint(d / (e + 1))));
        return new Ss(eps, (int) d, (int) k);
      }
      case "cms": case "hcms": {
        long m = integer(spec, "m", 0);
        if (m == 0 && "cms".equals(mech)) {
          m = Math.max(2, (long) Math.floor(Math.sqrt(d - 1)) + 1);
          while (!isPrime(m)) {
            m++;
          }
        } else if (m == 0) {
          m = 2;
          while (m * m < d) {
            m *= 2;
          }
        }
        return new Sketch((String) mech, eps, d, m);
      }
      case "ps": case "psi": return new Padded((String) mech, eps, d, spec);
      case "setsize": return new SetSize(eps, d, spec);
      case "hh": {
        boolean consistency = !Boolean.FALSE.equals(spec.get("consistency"));
        long fanout = integer(spec, "fanout", consistency ? 8 : 4);
        Object base = spec.get("base");
        return new Hh(eps, d, fanout, base == null ? "hrr" : (String) base);
      }
      case "haar": return new Haar(eps, d);
      case "sw": return new Sw(eps, d, num(spec, "b"), integer(spec, "out_bins", 1024));
      case "pm": return new Pm(eps, d);
      case "duchi": return new Duchi(eps, d);
      default:
        throw new IllegalArgumentException("unknown or unresolved mechanism " + mech
            + " (the SDK needs the resolved spec the query API serves)");
    }
  }

  // ---- set-valued mechanisms (docs/wire-format.md §4, "Set-valued mechanisms") --------

  static long[] intList(Object x, String what) {
    if (!(x instanceof List)) {
      throw new IllegalArgumentException("oracle." + what + " must be a list of integers");
    }
    List<?> l = (List<?>) x;
    long[] out = new long[l.size()];
    for (int i = 0; i < out.length; i++) {
      if (!(l.get(i) instanceof Long)) {
        throw new IllegalArgumentException("oracle." + what + " must be a list of integers");
      }
      out[i] = (Long) l.get(i);
    }
    return out;
  }

  static long[][] itemsets(Object x) {
    if (!(x instanceof List)) {
      throw new IllegalArgumentException("oracle.itemsets must be a list of lists of integers");
    }
    List<?> l = (List<?>) x;
    long[][] out = new long[l.size()][];
    for (int i = 0; i < out.length; i++) {
      out[i] = intList(l.get(i), "itemsets");
    }
    return out;
  }

  /** Sorted distinct item indices. */
  static long[] itemsOf(long[] values) {
    return Arrays.stream(values).distinct().sorted().toArray();
  }

  /** The entries a set contributes, ascending (itemset positions, candidate positions, items). */
  static long[] setEntries(long[] items, long[] candidates, long[][] itemsets) {
    if (itemsets != null) {
      java.util.Set<Long> have = new java.util.HashSet<>();
      for (long x : items) {
        have.add(x);
      }
      List<Long> out = new ArrayList<>();
      for (int j = 0; j < itemsets.length; j++) {
        boolean all = true;
        for (long x : itemsets[j]) {
          all &= have.contains(x);
        }
        if (all) {
          out.add((long) j);
        }
      }
      return out.stream().mapToLong(Long::longValue).toArray();
    }
    if (candidates != null) {
      Map<Long, Long> pos = new java.util.HashMap<>();
      for (int i = 0; i < candidates.length; i++) {
        pos.put(candidates[i], (long) i);
      }
      return Arrays.stream(items).filter(pos::containsKey).map(pos::get).sorted().toArray();
    }
    return items;
  }

  /**
   * ps / psi: pad the entries to {@code length}, sample one, report it with GRR at the
   * amplified epsilon' = log(l * expm1(eps) + 1) or OLH at eps, over m entries + l dummies.
   */
  static final class Padded extends Base {
    final Oracle inner;
    final long length;
    final long entries;
    final long[] candidates;
    final long[][] itemsets;

    Padded(String mech, double eps, long d, Map<String, Object> spec) {
      super(mech);
      length = integer(spec, "length", 1);
      candidates = "ps".equals(mech) && spec.get("candidates") != null
          ? intList(spec.get("candidates"), "candidates") : null;
      if ("psi".equals(mech)) {
        if (spec.get("itemsets") != null) {
          itemsets = itemsets(spec.get("itemsets"));
        } else {
          itemsets = new long[(int) d][];
          for (int i = 0; i < d; i++) {
            itemsets[i] = new long[] {i};
          }
        }
      } else {
        itemsets = null;
      }
      entries = itemsets != null ? itemsets.length : candidates != null ? candidates.length : d;
      long size = entries + length;
      Object in = spec.get("inner");
      if (in == null || "grr".equals(in)) {
        inner = new Grr(Math.log(length * Math.expm1(eps) + 1), size);
      } else if ("olh".equals(in)) {
        inner = new LocalHashing("olh", eps, size, LocalHashing.defaultG(eps, size));
      } else {
        throw new IllegalArgumentException("oracle.inner must be grr or olh (resolved), got "
            + in);
      }
      columns.addAll(inner.columns());
    }

    @Override
    public Map<String, Object> perturb(long v, DrawSource src) {
      return perturbItems(new long[] {v}, src);
    }

    @Override
    public Map<String, Object> perturbItems(long[] values, DrawSource src) {
      long[] e = setEntries(itemsOf(values), candidates, itemsets);
      long s = e.length;
      long t = below(src, Math.max(s, length));
      long x = t < s ? e[(int) t] : entries + below(src, length);
      return inner.perturb(x, src);
    }
  }

  /** setsize: min(number of entries, max_size) through the inner frequency oracle. */
  static final class SetSize extends Base {
    final Oracle inner;
    final long maxSize;
    final long[] candidates;
    final long[][] itemsets;

    SetSize(double eps, long d, Map<String, Object> spec) {
      super("setsize");
      candidates = spec.get("candidates") == null ? null
          : intList(spec.get("candidates"), "candidates");
      itemsets = spec.get("itemsets") == null ? null : itemsets(spec.get("itemsets"));
      maxSize = integer(spec, "max_size", -1);
      Object in = spec.get("inner");
      if (!(in instanceof String) || "auto".equals(in)) {
        throw new IllegalArgumentException("oracle.inner must be the resolved mechanism name");
      }
      Map<String, Object> sub = new LinkedHashMap<>();
      sub.put("mechanism", in);
      sub.put("epsilon", eps);
      sub.put("domain_size", maxSize + 1);
      inner = make(sub);
      columns.addAll(inner.columns());
    }

    @Override
    public Map<String, Object> perturb(long v, DrawSource src) {
      return perturbItems(new long[] {v}, src);
    }

    @Override
    public Map<String, Object> perturbItems(long[] values, DrawSource src) {
      long n = setEntries(itemsOf(values), candidates, itemsets).length;
      return inner.perturb(Math.min(n, maxSize), src);
    }
  }

  // ---- multi-attribute (docs/wire-format.md §4, "Multi-attribute") --------------------

  /** k of q questions without replacement, ascending (partial Fisher-Yates on 0..q-1). */
  public static int[] sampleQuestions(DrawSource src, int q, int k) {
    int[] idx = new int[q];
    for (int i = 0; i < q; i++) {
      idx[i] = i;
    }
    for (int i = 0; i < k; i++) {
      int j = i + (int) below(src, q - i);
      int tmp = idx[i];
      idx[i] = idx[j];
      idx[j] = tmp;
    }
    int[] out = Arrays.copyOf(idx, k);
    Arrays.sort(out);
    return out;
  }

  /** multi: {@code sample} of the attributes (and pairs) per report, each at eps/k. */
  @SuppressWarnings("unchecked")
  static final class Multi extends Base {
    final List<String> names = new ArrayList<>();
    final List<Oracle> subs = new ArrayList<>();
    final long[] radix;
    final int[][] pairs;
    final int sample;

    Multi(double eps, Map<String, Object> spec) {
      super("multi");
      Object a = spec.get("attributes");
      Object p = spec.get("pairs") == null ? new ArrayList<Object>() : spec.get("pairs");
      if (!(a instanceof List) || !(p instanceof List)) {
        throw new IllegalArgumentException(
            "oracle.attributes (and pairs) must be lists of oracle specs");
      }
      sample = (int) integer(spec, "sample", 1);
      List<Map<String, Object>> attrs = (List<Map<String, Object>>) a;
      List<Map<String, Object>> ps = (List<Map<String, Object>>) p;
      for (Map<String, Object> at : attrs) {
        names.add((String) at.get("name"));
        subs.add(sub(at, eps / sample));
      }
      radix = new long[attrs.size()];
      for (int j = 0; j < radix.length; j++) {
        radix[j] = ((Number) attrs.get(j).get("domain_size")).longValue();
      }
      pairs = new int[ps.size()][];
      for (int i = 0; i < pairs.length; i++) {
        List<String> ab = (List<String>) ps.get(i).get("attributes");
        pairs[i] = new int[] {names.indexOf(ab.get(0)), names.indexOf(ab.get(1))};
      }
      for (Map<String, Object> pr : ps) {
        List<String> ab = (List<String>) pr.get("attributes");
        names.add(ab.get(0) + "*" + ab.get(1));
        subs.add(sub(pr, eps / sample));
      }
      columns.add(new Column("attrs", "uint8", names.size()));
      for (int j = 0; j < names.size(); j++) {
        for (Column c : subs.get(j).columns()) {
          columns.add(new Column(names.get(j) + "." + c.name, c.dtype, c.bits));
        }
      }
    }

    private static Oracle sub(Map<String, Object> spec, double eps) {
      Map<String, Object> m = new LinkedHashMap<>(spec);
      m.remove("name");
      m.remove("attributes");
      m.put("epsilon", eps);
      return make(m);
    }

    @Override
    public Map<String, Object> perturb(long v, DrawSource src) {
      long[] row = new long[radix.length];
      for (int j = radix.length - 1; j >= 0; j--) {
        row[j] = v % radix[j];
        v /= radix[j];
      }
      return perturbItems(row, src);
    }

    @Override
    public Map<String, Object> perturbItems(long[] row, DrawSource src) {
      if (row.length != radix.length) {
        throw new IllegalArgumentException("a multi value needs " + radix.length + " indices");
      }
      for (int j = 0; j < row.length; j++) {
        if (row[j] < 0 || row[j] >= radix[j]) {
          throw new IllegalArgumentException("attribute " + names.get(j) + ": index "
              + row[j] + " outside [0, " + radix[j] + ")");
        }
      }
      long[] vals = Arrays.copyOf(row, names.size());
      for (int i = 0; i < pairs.length; i++) {
        vals[row.length + i] = row[pairs[i][0]] * radix[pairs[i][1]] + row[pairs[i][1]];
      }
      int[] chosen = sampleQuestions(src, names.size(), sample);
      Map<String, Object> out = new LinkedHashMap<>();
      out.put("attrs", chosen);
      for (int j = 0; j < names.size(); j++) {
        Oracle o = subs.get(j);
        Map<String, Object> rep = Arrays.binarySearch(chosen, j) >= 0
            ? o.perturb(vals[j], src) : null;
        for (Column c : o.columns()) {
          out.put(names.get(j) + "." + c.name, rep != null ? rep.get(c.name)
              : c.bits > 0 ? new int[0] : (Object) 0L);
        }
      }
      return out;
    }
  }

  /** The two-level instantaneous channel at epsilon_1 (sets it on the oracle, returns it). */
  public static Rerandomizer rerandomizer(Oracle oracle, double epsilon1) {
    if (oracle instanceof Grr) {
      ((Grr) oracle).instant(epsilon1);
    } else if (oracle instanceof Unary) {
      ((Unary) oracle).instant(epsilon1);
    } else if (oracle instanceof LocalHashing) {
      ((LocalHashing) oracle).instant(epsilon1);
    } else if (oracle instanceof Hrr) {
      ((Hrr) oracle).instant(epsilon1);
    } else {
      throw new IllegalArgumentException("memoization 'two-level' needs a mechanism in "
          + TWO_LEVEL_MECHANISMS + ", got " + oracle.mechanism());
    }
    return (Rerandomizer) oracle;
  }
}
