package org.ldpstream.sdk;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Perturbation speed per mechanism (reports per second, SecureRandom draws and binary
 * encoding included) over the collections of sdks/bench/cases.json, as the JavaScript bench.
 * Run: {@code java -cp sdks/java/target/classes:sdks/java/target/test-classes
 * org.ldpstream.sdk.BenchTool}.
 */
public final class BenchTool {
  private BenchTool() {}

  /** The benchmark collections, shared with the JavaScript SDK's bench: sdks/bench/cases.json
   * (found from the working directory up, or named by -Dldp.benchCases). */
  static Path casesFile() {
    String named = System.getProperty("ldp.benchCases");
    if (named != null) {
      return Paths.get(named);
    }
    for (Path p = Paths.get("").toAbsolutePath(); p != null; p = p.getParent()) {
      for (String rel : new String[] {"sdks/bench/cases.json", "bench/cases.json"}) {
        if (Files.isRegularFile(p.resolve(rel))) {
          return p.resolve(rel);
        }
      }
    }
    throw new IllegalStateException("sdks/bench/cases.json not found: set -Dldp.benchCases");
  }

  public static void main(String[] args) throws Exception {
    List<?> cases = (List<?>) Json.parse(
        new String(Files.readAllBytes(casesFile()), StandardCharsets.UTF_8));
    SecureRandomSource src = new SecureRandomSource();
    System.out.println("mechanism      params                      reports/s   (encode incl.)");
    for (Object c : cases) {
      List<?> cs = (List<?>) c;
      CollectionSpec spec = CollectionSpec.fromJson(cs.get(1));
      Oracle oracle = spec.oracle();
      Rerandomizer inst = "two-level".equals(spec.memoization)
          ? Mechanisms.rerandomizer(oracle, spec.epsilon1) : null;
      long size = spec.domainSize().min(java.math.BigInteger.valueOf(1L << 40)).longValue();
      run(spec, oracle, inst, src, size, 20000); // warm up the JIT
      int n = 5000;
      double secs = run(spec, oracle, inst, src, size, n);
      while (secs < 0.3) {
        n *= 4;
        secs = run(spec, oracle, inst, src, size, n);
      }
      for (int rep = 0; rep < 2; rep++) { // best of three: the machine may be shared
        secs = Math.min(secs, run(spec, oracle, inst, src, size, n));
      }
      System.out.printf("%-40s %,12d%n", cs.get(0), Math.round(n / secs));
    }
  }

  static double run(CollectionSpec spec, Oracle oracle, Rerandomizer inst,
                    SecureRandomSource src, long size, int n) {
    long t0 = System.nanoTime();
    List<Map<String, Object>> reports = new ArrayList<>(n);
    boolean sets = spec.setValued();
    for (int i = 0; i < n; i++) {
      // set-valued: a 3-item set per report; other mechanisms (multi too): a domain index
      Map<String, Object> r = sets
          ? oracle.perturbItems(new long[] {i % size, (7L * i + 1) % size, (13L * i + 5) % size},
              src)
          : oracle.perturb(i % size, src);
      reports.add(inst != null ? inst.rerandomize(r, src) : r);
    }
    Encoding.binary(spec, oracle.columns(), reports);
    return (System.nanoTime() - t0) / 1e9;
  }
}
