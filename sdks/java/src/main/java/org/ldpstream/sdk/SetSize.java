package org.ldpstream.sdk;

import static org.ldpstream.sdk.Mechanisms.intList;
import static org.ldpstream.sdk.Mechanisms.integer;
import static org.ldpstream.sdk.Mechanisms.itemsOf;
import static org.ldpstream.sdk.Mechanisms.itemsets;
import static org.ldpstream.sdk.Mechanisms.make;
import static org.ldpstream.sdk.Mechanisms.setEntries;

import java.util.LinkedHashMap;
import java.util.Map;

/** setsize: min(number of entries, max_size) through the inner frequency oracle. */
final class SetSize extends AbstractOracle {
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
