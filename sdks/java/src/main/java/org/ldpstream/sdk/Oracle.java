package org.ldpstream.sdk;

import java.util.List;
import java.util.Map;

/** A mechanism's device side. */
interface Oracle {
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
