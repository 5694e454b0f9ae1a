package org.ldpstream.sdk;

import static org.ldpstream.sdk.Mechanisms.itemsOf;
import static org.ldpstream.sdk.Mechanisms.setEntries;

import java.util.Map;

/**
 * A set-valued oracle (ps, psi, setsize): the device's items, restricted to the candidates or
 * mapped to the itemsets it holds, choose one index that the inner frequency oracle reports.
 */
abstract class SetOracle extends AbstractOracle {
  Oracle inner;
  long[] candidates;
  long[][] itemsets;

  SetOracle(String mechanism) {
    super(mechanism);
  }

  /** Sets the inner oracle; its columns are the report's. */
  final void reportThrough(Oracle oracle) {
    inner = oracle;
    columns.addAll(oracle.columns());
  }

  /** The index the inner oracle reports for these entries (may draw from {@code src}). */
  abstract long choose(long[] entries, DrawSource src);

  @Override
  public Map<String, Object> perturb(long v, DrawSource src) {
    return perturbItems(new long[] {v}, src);
  }

  @Override
  public Map<String, Object> perturbItems(long[] values, DrawSource src) {
    return inner.perturb(choose(setEntries(itemsOf(values), candidates, itemsets), src), src);
  }
}
