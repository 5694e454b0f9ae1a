package org.ldpstream.sdk;

import static org.ldpstream.sdk.Mechanisms.intList;
import static org.ldpstream.sdk.Mechanisms.integer;
import static org.ldpstream.sdk.Mechanisms.itemsets;
import static org.ldpstream.sdk.Mechanisms.make;

import java.util.LinkedHashMap;
import java.util.Map;

/** setsize: min(number of entries, max_size) through the inner frequency oracle. */
final class SetSize extends SetOracle {
  final long maxSize;

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
    reportThrough(make(sub));
  }

  /** The number of entries, capped at {@code max_size}. */
  @Override
  long choose(long[] entries, DrawSource src) {
    return Math.min(entries.length, maxSize);
  }
}
