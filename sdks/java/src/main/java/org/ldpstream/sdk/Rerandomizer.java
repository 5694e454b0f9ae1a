package org.ldpstream.sdk;

import java.util.Map;

/** The instantaneous channel of two-level memoization. */
interface Rerandomizer {
  Map<String, Object> rerandomize(Map<String, Object> permanent, DrawSource src);
}
