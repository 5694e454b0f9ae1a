package org.ldpstream.sdk;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The parameter ranges ldpcore accepts ({@link LimitsData}, generated from ldpcore by
 * sdks/vectors/generate.py), enforced on a served spec before any draw: a spec outside them
 * is refused with a {@link SpecException} naming the parameter and the allowed range. Beyond
 * them the kernels' probabilities round to 0 or 1 (GRR at ε = 40 would send the raw value)
 * or overflow (ε = 1000 gives NaN); the reasons are in ldpcore/limits.py.
 */
@SuppressWarnings("unchecked")
final class Limits {
  private Limits() {}

  static final Map<String, Object> DATA = (Map<String, Object>) Json.parse(LimitsData.JSON);
  private static final Map<String, Object> EPS = (Map<String, Object>) DATA.get("epsilon");
  private static final Map<String, Object> DOMAIN = (Map<String, Object>) DATA.get("domain_size");
  private static final Map<String, Object> INTS = (Map<String, Object>) DATA.get("integers");
  static final double PROBABILITY_FLOOR = ((Number) DATA.get("probability_floor")).doubleValue();

  private static double[] range(Map<String, Object> table, String key) {
    List<Object> r = (List<Object>) table.get(key);
    return new double[] {((Number) r.get(0)).doubleValue(), ((Number) r.get(1)).doubleValue()};
  }

  private static long[] intRange(String mech, String key) {
    Map<String, Object> t = (Map<String, Object>) INTS.get(mech);
    List<Object> r = (List<Object>) t.get(key);
    return new long[] {((Number) r.get(0)).longValue(), ((Number) r.get(1)).longValue()};
  }

  private static String fmt(double x) {
    return x == Math.rint(x) && Math.abs(x) < 1e15 ? Long.toString((long) x) : Double.toString(x);
  }

  static double real(Map<String, Object> spec, String key, String where) {
    Object v = spec.get(key);
    if (!(v instanceof Number) || Double.isNaN(((Number) v).doubleValue())
        || Double.isInfinite(((Number) v).doubleValue())) {
      throw new SpecException(where + "." + key + " must be a finite number, got " + v,
          where + "." + key);
    }
    return ((Number) v).doubleValue();
  }

  static long integer(Map<String, Object> spec, String key, String where, long lo, long hi,
                      Long dflt) {
    Object v = spec.containsKey(key) ? spec.get(key) : dflt;
    if (!(v instanceof Long || v instanceof Integer) || ((Number) v).longValue() < lo
        || ((Number) v).longValue() > hi) {
      throw new SpecException(where + "." + key + " must be an integer in [" + lo + ", " + hi
          + "], got " + v, where + "." + key);
    }
    return ((Number) v).longValue();
  }

  static void checkEpsilon(String mech, double eps, String where, String what) {
    if (!EPS.containsKey(mech)) {
      throw new SpecException(where + ".mechanism: unknown mechanism " + mech,
          where + ".mechanism");
    }
    double[] r = range(EPS, mech);
    if (!(eps >= r[0] && eps <= r[1])) {
      throw new SpecException((what != null ? what : where + ".epsilon") + " must be in ["
          + fmt(r[0]) + ", " + fmt(r[1]) + "] for " + mech + ", got " + fmt(eps)
          + ": outside it the mechanism's probabilities round to 0 or 1 (its reports would not "
          + "be private)", where + ".epsilon");
    }
  }

  static void checkDomain(String mech, double d, String where) {
    double[] r = range(DOMAIN, mech);
    if (!(d >= r[0] && d <= r[1])) {
      throw new SpecException(where + ".domain_size must be an integer in [" + fmt(r[0]) + ", "
          + fmt(r[1]) + "] for " + mech + ", got " + fmt(d), where + ".domain_size");
    }
  }

  /** Check a resolved oracle spec (recursively for hh's base, setsize's and ps's inner oracle
   * and multi's attributes); {@code derivedEps} for the inner oracles whose ε is derived. */
  static void checkOracle(Map<String, Object> spec, String where, Double derivedEps) {
    Object m = spec.get("mechanism");
    if (!(m instanceof String) || !EPS.containsKey(m)) {
      List<String> names = new ArrayList<>(((Map<String, Object>) EPS).keySet());
      Collections.sort(names);
      throw new SpecException(where + ".mechanism must be one of " + names + " (resolved), got "
          + m, where + ".mechanism");
    }
    String mech = (String) m;
    double eps = derivedEps != null ? derivedEps : real(spec, "epsilon", where);
    checkEpsilon(mech, eps, where, derivedEps == null ? null : where + ": the derived epsilon");
    if ("pem".equals(mech)) {
      long[] b = intRange("pem", "bits");
      long bits = integer(spec, "bits", where, b[0], b[1], null);
      for (String k : new String[] {"keep", "eta", "pool"}) {
        if (spec.containsKey(k)) {
          long[] r = intRange("pem", k);
          integer(spec, k, where, r[0], r[1], null);
        }
      }
      if (spec.containsKey("hash_seed")) {
        integer(spec, "hash_seed", where, 0, Long.MAX_VALUE, null);
      }
      checkDomain(mech, Math.pow(2, bits), where);
      return;
    }
    double[] dr = range(DOMAIN, mech);
    long d = integer(spec, "domain_size", where, (long) dr[0], (long) Math.min(dr[1], 0x1p62),
        null);
    switch (mech) {
      case "olh":
        if (spec.containsKey("g")) {
          long[] r = intRange("olh", "g");
          integer(spec, "g", where, r[0], r[1], null);
        }
        break;
      case "cms":
      case "hcms":
        if (spec.containsKey("m")) {
          long[] r = intRange(mech, "m");
          integer(spec, "m", where, r[0], r[1], null);
        }
        break;
      case "ss":
        if (spec.containsKey("subset_size")) {
          integer(spec, "subset_size", where, 1, d - 1, null);
        }
        break;
      case "sw": {
        if (spec.containsKey("out_bins")) {
          long[] r = intRange("sw", "out_bins");
          integer(spec, "out_bins", where, r[0], r[1], null);
        }
        double[] br = range((Map<String, Object>) ((Map<String, Object>) DATA.get("reals"))
            .get("sw"), "b");
        double b = real(spec, "b", where);
        double bMax = Math.min(br[1], (1 / PROBABILITY_FLOOR - 1) / (2 * Math.exp(eps)));
        if (!(b >= br[0] && b <= bMax)) {
          throw new SpecException(where + ".b must be in [" + br[0] + ", " + bMax
              + "] at epsilon " + fmt(eps) + ", got " + b, where + ".b");
        }
        break;
      }
      case "hh": {
        Object base = spec.containsKey("base") ? spec.get("base") : "hrr";
        List<Object> bases = (List<Object>) ((Map<String, Object>) ((Map<String, Object>)
            DATA.get("choices")).get("hh")).get("base");
        if (!bases.contains(base)) {
          throw new SpecException(where + ".base must be one of " + bases + ", got " + base,
              where + ".base");
        }
        long[] fr = intRange("hh", "fanout");
        long fanout = integer(spec, "fanout", where, fr[0], fr[1],
            Boolean.FALSE.equals(spec.get("consistency")) ? 4L : 8L);
        checkEpsilon((String) base, eps, where, where + ".epsilon (with base " + base + ")");
        double top = 1;
        while (top < d) {
          top *= fanout;
        }
        checkDomain((String) base, top, where + " (base " + base + " over fanout^height)");
        break;
      }
      case "ps":
      case "psi": {
        long[] lr = intRange(mech, "length");
        long l = integer(spec, "length", where, lr[0], lr[1], 1L);
        Object inner = spec.get("inner");
        if (inner == null || "grr".equals(inner)) {
          checkEpsilon("grr", Math.log(l * Math.expm1(eps) + 1), where, where
              + ": the amplified epsilon' = ln(length (e^epsilon - 1) + 1) of its GRR");
        }
        break;
      }
      case "setsize": {
        long[] mr = intRange("setsize", "max_size");
        long maxSize = integer(spec, "max_size", where, mr[0], mr[1], null);
        Object inner = spec.get("inner");
        if (inner instanceof String && !"auto".equals(inner)) {
          Map<String, Object> sub = new LinkedHashMap<>();
          sub.put("mechanism", inner);
          sub.put("epsilon", eps);
          sub.put("domain_size", maxSize + 1);
          checkOracle(sub, where + ".inner", null);
        }
        break;
      }
      case "multi": {
        Object attrs = spec.get("attributes");
        if (!(attrs instanceof List)) {
          throw new SpecException(where + ".attributes must be a list", where + ".attributes");
        }
        List<Object> a = (List<Object>) attrs;
        long[] ar = intRange("multi", "attributes");
        if (a.size() < ar[0] || a.size() > ar[1]) {
          throw new SpecException(where + ".attributes: " + ar[0] + " to " + ar[1]
              + " attributes, got " + a.size(), where + ".attributes");
        }
        List<Object> pairs = spec.get("pairs") instanceof List ? (List<Object>) spec.get("pairs")
            : new ArrayList<Object>();
        long k = integer(spec, "sample", where, 1, a.size() + pairs.size(), null);
        for (int i = 0; i < a.size() + pairs.size(); i++) {
          Object q = i < a.size() ? a.get(i) : pairs.get(i - a.size());
          String name = i < a.size() ? "attributes[" + i + "]" : "pairs[" + (i - a.size()) + "]";
          if (!(q instanceof Map)) {
            throw new SpecException(where + "." + name + " must be an object", where + "." + name);
          }
          checkOracle((Map<String, Object>) q, where + "." + name, eps / k);
        }
        break;
      }
      default:
    }
  }

  /** epsilon_1 of two-level memoization: in (0, max]. */
  static void checkEpsilon1(double eps1) {
    double[] r = range(DATA, "epsilon_1");
    if (!(eps1 > r[0] && eps1 <= r[1])) {
      throw new SpecException("epsilon_1 must be in (" + fmt(r[0]) + ", " + fmt(r[1])
          + "], got " + fmt(eps1), "epsilon_1");
    }
  }

  /** The backstop after a mechanism computed a probability: finite, in [floor, 1 - floor]. */
  static void checkProbability(double p, String what) {
    if (!(p >= PROBABILITY_FLOOR && p <= 1 - PROBABILITY_FLOOR)) {
      throw new SpecException(what + " = " + p + " is not a usable probability: the spec's "
          + "parameters are outside the ranges the SDK supports", null);
    }
  }
}
