package org.ldpstream.sdk;

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Batch perturbation for the Python-side statistical checks (tests/sdks): for every pair of
 * arguments REQUEST OUTPUT, reads {@code {"collection": spec, "values": [domain indices]}}
 * from REQUEST (set-valued: lists of item indices; multi: lists of per-attribute indices),
 * perturbs every value with SecureRandom (two-level: permanent answer then one
 * re-randomized report) and writes one binary message with all reports to OUTPUT.
 */
public final class PerturbTool {
  private PerturbTool() {}

  public static void main(String[] args) throws Exception {
    SecureRandomSource src = new SecureRandomSource();
    for (int i = 0; i + 1 < args.length; i += 2) {
      one(args[i], args[i + 1], src);
    }
  }

  @SuppressWarnings("unchecked")
  static void one(String request, String output, SecureRandomSource src) throws Exception {
    ToolRequest req = new ToolRequest(request);
    CollectionSpec spec = req.spec;
    Oracle oracle = spec.oracle();
    Rerandomizer inst = "two-level".equals(spec.memoization)
        ? Mechanisms.rerandomizer(oracle, spec.epsilon1) : null;
    List<Map<String, Object>> reports = new ArrayList<>();
    for (Object v : req.values()) {
      Map<String, Object> r;
      if (v instanceof List) {  // a set of item indices, or one index per attribute
        long[] items = ((List<Object>) v).stream().mapToLong(x -> ((Number) x).longValue())
            .toArray();
        r = oracle.perturbItems(items, src);
      } else {
        long x = v instanceof String ? Long.parseLong((String) v) : ((Number) v).longValue();
        r = oracle.perturb(x, src);
      }
      reports.add(inst != null ? inst.rerandomize(r, src) : r);
    }
    Files.write(Paths.get(output), Encoding.binary(spec, oracle.columns(), reports));
  }
}
