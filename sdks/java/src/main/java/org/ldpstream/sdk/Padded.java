package org.ldpstream.sdk;

import static org.ldpstream.sdk.Draws.below;
import static org.ldpstream.sdk.Mechanisms.intList;
import static org.ldpstream.sdk.Mechanisms.integer;
import static org.ldpstream.sdk.Mechanisms.itemsets;

import java.util.Map;

/**
 * ps / psi: pad the entries to {@code length}, sample one, report it with GRR at the
 * amplified epsilon' = log(l * expm1(eps) + 1) or OLH at eps, over m entries + l dummies.
 */
final class Padded extends SetOracle {
  final long length;
  final long entries;

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
      reportThrough(new Grr(Math.log(length * Math.expm1(eps) + 1), size));
    } else if ("olh".equals(in)) {
      reportThrough(new LocalHashing("olh", eps, size, LocalHashing.defaultG(eps, size)));
    } else {
      throw new IllegalArgumentException("oracle.inner must be grr or olh (resolved), got "
          + in);
    }
  }

  /** One of the entries padded to {@code length} with dummies, uniformly. */
  @Override
  long choose(long[] e, DrawSource src) {
    long s = e.length;
    long t = below(src, Math.max(s, length));
    return t < s ? e[(int) t] : entries + below(src, length);
  }
}
