package org.ldpstream.sdk;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The fleet's privacy budget on the device (docs/budget.md, as ldpcore/budget.py): what one
 * report really costs ({@link #reportCharge}) and the daily ledger kept in the device store
 * ({@code "ledger"}: ε spent per UTC day and collection, the current and previous day).
 */
final class Budget {
  static final long DAY_SECONDS = 86400;
  /** Float sums of charges may exceed an exact budget by rounding. */
  private static final double SLACK = 1e-9;

  private Budget() {}

  private static double[] grr(double eps, double k) {
    double e = Math.exp(eps);
    return new double[] {e / (e + k - 1), 1.0 / (e + k - 1)};
  }

  private static double[] unary(String mech, double eps) {
    if ("sue".equals(mech)) {
      double h = Math.exp(eps / 2);
      return new double[] {h / (h + 1), 1 / (h + 1)};
    }
    return new double[] {0.5, 1 / (Math.exp(eps) + 1)};
  }

  /** ε of one fresh report: the oracle's ε, or for two-level the composed channel's one-report
   * ε (ldpcore.longitudinal.TwoLevel.epsilon_report). */
  static double epsilonPerReport(CollectionSpec spec, Oracle oracle) {
    double eps = Mechanisms.num(spec.oracleSpec, "epsilon");
    if (!"two-level".equals(spec.memoization) || spec.epsilon1 == null) {
      return eps;
    }
    String mech = String.valueOf(spec.oracleSpec.get("mechanism"));
    double e1 = spec.epsilon1;
    double[] inf;
    double[] one;
    if ("grr".equals(mech)) {
      double d = Mechanisms.num(spec.oracleSpec, "domain_size");
      inf = grr(eps, d);
      one = grr(e1, d);
    } else if ("sue".equals(mech) || "oue".equals(mech)) {
      inf = unary(mech, eps);
      one = unary(mech, e1);
    } else if ("olh".equals(mech) || "blh".equals(mech)) {
      double g = ((LocalHashing) oracle).g;
      inf = grr(eps, g);
      one = grr(e1, g);
    } else {  // hrr
      double e = Math.exp(eps);
      double p = e / (e + 1);
      inf = new double[] {p, 1.0 - p};
      double x = Math.exp(e1);
      one = new double[] {x / (x + 1), 1 / (x + 1)};
    }
    double p = inf[0] * one[0] + (1 - inf[0]) * one[1];
    double q = inf[1] * one[0] + (1 - inf[1]) * one[1];
    if ("sue".equals(mech) || "oue".equals(mech)) {
      return Math.log(p * (1 - q) / ((1 - p) * q));
    }
    if ("hrr".equals(mech)) {
      return Math.log(p / (1 - p));
    }
    return Math.log(p / q);
  }

  /** What one report costs (ldpcore.budget.report_charge): none ε; permanent ε for a new
   * value, 0 for a repeat; two-level the increase of min(k·ε_report, ε∞) from k to k + 1. */
  static double reportCharge(CollectionSpec spec, Oracle oracle, boolean fresh,
                             long valueReports) {
    double eps = Mechanisms.num(spec.oracleSpec, "epsilon");
    if ("none".equals(spec.memoization)) {
      return eps;
    }
    if ("permanent".equals(spec.memoization)) {
      return fresh ? eps : 0.0;
    }
    double er = epsilonPerReport(spec, oracle);
    long k = fresh ? 0 : Math.max(0, valueReports);
    return Math.max(0.0, Math.min((k + 1) * er, eps) - Math.min(k * er, eps));
  }

  /** The UTC day of epoch seconds {@code now}. */
  static long utcDay(double now) {
    return (long) Math.floor(now / DAY_SECONDS);
  }

  /** The store's ledger (null: none), checked and copied: budget (Double or null) and days. */
  @SuppressWarnings("unchecked")
  static Map<String, Object> read(Object raw) throws StoreException {
    if (raw == null) {
      return null;
    }
    if (!(raw instanceof Map)) {
      throw bad("not an object");
    }
    Map<String, Object> r = (Map<String, Object>) raw;
    Object b = r.get("budget");
    if (b != null && !(b instanceof Number)) {
      throw bad("budget is not a number");
    }
    Object rd = r.get("days") == null ? new LinkedHashMap<String, Object>() : r.get("days");
    if (!(rd instanceof Map)) {
      throw bad("days is not an object");
    }
    Map<String, Object> days = new LinkedHashMap<>();
    for (Map.Entry<String, Object> d : ((Map<String, Object>) rd).entrySet()) {
      if (!d.getKey().matches("-?\\d+") || !(d.getValue() instanceof Map)) {
        throw bad("day " + d.getKey());
      }
      Map<String, Object> cols = new LinkedHashMap<>();
      for (Map.Entry<String, Object> c : ((Map<String, Object>) d.getValue()).entrySet()) {
        if (!(c.getValue() instanceof Number)
            || Double.isNaN(((Number) c.getValue()).doubleValue())) {
          throw bad("day " + d.getKey() + ", " + c.getKey());
        }
        cols.put(c.getKey(), ((Number) c.getValue()).doubleValue());
      }
      days.put(String.valueOf(Long.parseLong(d.getKey())), cols);
    }
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("budget", b == null ? null : ((Number) b).doubleValue());
    out.put("days", days);
    return out;
  }

  private static StoreException bad(String why) {
    return new StoreException("the store has a bad ledger: " + why);
  }

  /** ε spent on the UTC day of {@code now}, every collection. */
  @SuppressWarnings("unchecked")
  static double spent(Map<String, Object> ledger, double now) {
    Object today = ((Map<String, Object>) ledger.get("days")).get(String.valueOf(utcDay(now)));
    double sum = 0;
    if (today instanceof Map) {
      for (Object v : ((Map<String, Object>) today).values()) {
        sum += ((Number) v).doubleValue();
      }
    }
    return sum;
  }

  /** True if spending {@code epsilon} more today stays within the budget. */
  static boolean allows(Map<String, Object> ledger, double epsilon, double now) {
    Object b = ledger.get("budget");
    if (b == null || epsilon <= 0) {
      return true;
    }
    return spent(ledger, now) + epsilon <= ((Number) b).doubleValue() * (1 + SLACK);
  }

  /** Record {@code epsilon} spent on {@code collection} today (today and yesterday kept). */
  @SuppressWarnings("unchecked")
  static void charge(Map<String, Object> ledger, String collection, double epsilon,
                     double now) {
    long day = utcDay(now);
    Map<String, Object> days = (Map<String, Object>) ledger.get("days");
    for (String d : new ArrayList<>(days.keySet())) {
      if (Long.parseLong(d) < day - 1) {
        days.remove(d);
      }
    }
    if (epsilon > 0) {
      Map<String, Object> today = (Map<String, Object>) days.get(String.valueOf(day));
      if (today == null) {
        today = new LinkedHashMap<>();
        days.put(String.valueOf(day), today);
      }
      Object had = today.get(collection);
      today.put(collection, (had == null ? 0.0 : ((Number) had).doubleValue()) + epsilon);
    }
  }
}
