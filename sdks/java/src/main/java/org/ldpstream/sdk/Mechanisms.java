package org.ldpstream.sdk;

import static org.ldpstream.sdk.Draws.below;
import static org.ldpstream.sdk.Draws.bernoulli;
import static org.ldpstream.sdk.Draws.uniform;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Every mechanism a collection can declare (one class each: Grr, Unary, LocalHashing, Hr,
 * Hrr, Ss, Sketch, Hh, Haar, Sw, Pm, Duchi, Pem, Padded, SetSize, Multi): report layout and
 * reference perturbation (docs/wire-format.md §3–4), built by {@link #make} from the resolved
 * oracle spec a collection serves; the helpers they share. Internal to the SDK.
 *
 * <p>A report is a {@code Map<String, Object>} in column order: a scalar column holds a
 * {@link Long}, a bitmask column an {@code int[]} of the ascending indices of its 1 bits.
 */
final class Mechanisms {
  private Mechanisms() {}


  /** Mechanisms that admit two-level memoization. */
  static final List<String> TWO_LEVEL_MECHANISMS =
      Arrays.asList("grr", "sue", "oue", "olh", "blh", "hrr");

  static final int MAX_STATE_CELLS_LH = 1 << 24;

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

  /** Bin v of {@code bins} as a point of [0, 1), uniform within the bin (the numeric
   * mechanisms' input). */
  static double dithered(long v, long bins, DrawSource src) {
    return (v + uniform(src)) / bins;
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
  static Oracle make(Map<String, Object> spec) {
    Oracle o = build(spec);
    usable(o);
    return o;
  }

  /** The backstop behind the range checks of {@link Limits}: every probability the oracle
   * draws against is usable (not NaN, 0 or 1), else {@link SpecException}. */
  static void usable(Oracle o) {
    String m = o.mechanism();
    if (o instanceof RandomizedResponse) {
      Limits.checkProbability(((RandomizedResponse) o).p, m + ": p");
    } else if (o instanceof Unary) {
      Limits.checkProbability(((Unary) o).p, m + ": p");
      Limits.checkProbability(((Unary) o).q, m + ": q");
    } else if (o instanceof Hr) {
      Limits.checkProbability(((Hr) o).p, m + ": p");
    } else if (o instanceof Ss) {
      Limits.checkProbability(((Ss) o).p, m + ": p");
    } else if (o instanceof Sketch) {
      Sketch k = (Sketch) o;
      Limits.checkProbability("cms".equals(m) ? k.flip : k.keep, m + ": its flip probability");
    } else if (o instanceof Haar) {
      Limits.checkProbability(((Haar) o).p, m + ": p");
    } else if (o instanceof Sw) {
      Limits.checkProbability(2 * ((Sw) o).b * ((Sw) o).p, m + ": the in-band probability");
    } else if (o instanceof Pm) {
      Limits.checkProbability(((Pm) o).pBand, m + ": the band probability");
    } else if (o instanceof Duchi) {
      Limits.checkProbability(1 / (((Duchi) o).e + 1), m + ": 1/(e^epsilon + 1)");
    } else if (o instanceof Pem) {
      Limits.checkProbability(((Pem) o).p, m + ": p");
    } else if (o instanceof Padded) {
      usable(((Padded) o).inner);
    }
  }

  private static Oracle build(Map<String, Object> spec) {
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
    long[] a = values.clone();
    Arrays.sort(a);
    int n = 0;
    for (int i = 0; i < a.length; i++) {
      if (i == 0 || a[i] != a[i - 1]) {
        a[n++] = a[i];
      }
    }
    return Arrays.copyOf(a, n);
  }

  /** The entries a set contributes, ascending (itemset positions, candidate positions, items). */
  static long[] setEntries(long[] items, long[] candidates, long[][] itemsets) {
    if (itemsets != null) {
      java.util.Set<Long> have = new java.util.HashSet<>();
      for (long x : items) {
        have.add(x);
      }
      long[] out = new long[itemsets.length];
      int n = 0;
      for (int j = 0; j < itemsets.length; j++) {
        boolean all = true;
        for (long x : itemsets[j]) {
          all &= have.contains(x);
        }
        if (all) {
          out[n++] = j;
        }
      }
      return Arrays.copyOf(out, n);
    }
    if (candidates != null) {
      Map<Long, Long> pos = new java.util.HashMap<>();
      for (int i = 0; i < candidates.length; i++) {
        pos.put(candidates[i], (long) i);
      }
      long[] out = new long[items.length];
      int n = 0;
      for (long x : items) {
        Long at = pos.get(x);
        if (at != null) {
          out[n++] = at;
        }
      }
      out = Arrays.copyOf(out, n);
      Arrays.sort(out);
      return out;
    }
    return items;
  }

  // ---- multi-attribute (docs/wire-format.md §4, "Multi-attribute") --------------------

  /** k of q questions without replacement, ascending (partial Fisher-Yates on 0..q-1). */
  static int[] sampleQuestions(DrawSource src, int q, int k) {
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

  /** The two-level instantaneous channel at epsilon_1 (sets it on the oracle, returns it). */
  static Rerandomizer rerandomizer(Oracle oracle, double epsilon1) {
    if (oracle instanceof RandomizedResponse) {
      ((RandomizedResponse) oracle).instant(epsilon1);
    } else if (oracle instanceof Unary) {
      ((Unary) oracle).instant(epsilon1);
    } else {
      throw new IllegalArgumentException("memoization 'two-level' needs a mechanism in "
          + TWO_LEVEL_MECHANISMS + ", got " + oracle.mechanism());
    }
    return (Rerandomizer) oracle;
  }
}
