package org.ldpstream.sdk;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Perturbation speed per mechanism (reports per second, SecureRandom draws and binary
 * encoding included); the same collections as sdks/js/bench/cases.ts.
 * Run: {@code java -cp sdks/java/target/classes org.ldpstream.sdk.tools.Bench}.
 */
public final class BenchTool {
  private BenchTool() {}

  static final String INTS = "{\"kind\":\"integers\",\"low\":0,\"high\":%d}";
  static final String IV = "{\"kind\":\"interval\",\"low\":0.0,\"high\":1.0,\"bins\":%d}";

  static String[] c(String name, String oracle, String domain, String extra) {
    return new String[] {name, "{\"id\":\"bench\",\"oracle\":" + oracle + ",\"domain\":" + domain
        + extra + "}"};
  }

  static String ints(long n) {
    return String.format(INTS, n - 1);
  }

  public static void main(String[] args) throws Exception {
    List<String[]> cases = new ArrayList<>();
    cases.add(c("grr eps=1 d=16", "{\"mechanism\":\"grr\",\"epsilon\":1.0,\"domain_size\":16}", ints(16), ""));
    cases.add(c("oue eps=1 d=64", "{\"mechanism\":\"oue\",\"epsilon\":1.0,\"domain_size\":64}", ints(64), ""));
    cases.add(c("sue eps=1 d=64", "{\"mechanism\":\"sue\",\"epsilon\":1.0,\"domain_size\":64}", ints(64), ""));
    cases.add(c("blh eps=1 d=1024", "{\"mechanism\":\"blh\",\"epsilon\":1.0,\"domain_size\":1024}", ints(1024), ""));
    cases.add(c("olh eps=1 d=1024 g=3", "{\"mechanism\":\"olh\",\"epsilon\":1.0,\"domain_size\":1024,\"g\":3}", ints(1024), ""));
    cases.add(c("hr eps=1 d=1024", "{\"mechanism\":\"hr\",\"epsilon\":1.0,\"domain_size\":1024}", ints(1024), ""));
    cases.add(c("hrr eps=1 d=1024", "{\"mechanism\":\"hrr\",\"epsilon\":1.0,\"domain_size\":1024}", ints(1024), ""));
    cases.add(c("ss eps=1 d=64 k=17", "{\"mechanism\":\"ss\",\"epsilon\":1.0,\"domain_size\":64,\"subset_size\":17}", ints(64), ""));
    cases.add(c("cms eps=2 d=1024 m=37", "{\"mechanism\":\"cms\",\"epsilon\":2.0,\"domain_size\":1024,\"m\":37}", ints(1024), ""));
    cases.add(c("hcms eps=2 d=1024 m=32", "{\"mechanism\":\"hcms\",\"epsilon\":2.0,\"domain_size\":1024,\"m\":32}", ints(1024), ""));
    cases.add(c("hh eps=1 d=1024 B=8 hrr", "{\"mechanism\":\"hh\",\"epsilon\":1.0,\"domain_size\":1024,\"fanout\":8,\"base\":\"hrr\",\"consistency\":true,\"nonnegative\":false}", ints(1024), ""));
    cases.add(c("haar eps=1 d=1024", "{\"mechanism\":\"haar\",\"epsilon\":1.0,\"domain_size\":1024}", ints(1024), ""));
    cases.add(c("sw eps=1 bins=64", "{\"mechanism\":\"sw\",\"epsilon\":1.0,\"domain_size\":64,\"low\":0.0,\"high\":1.0,\"out_bins\":1024,\"b\":0.25,\"smoothing\":true}", String.format(IV, 64), ""));
    cases.add(c("pm eps=1 bins=64", "{\"mechanism\":\"pm\",\"epsilon\":1.0,\"domain_size\":64,\"low\":0.0,\"high\":1.0}", String.format(IV, 64), ""));
    cases.add(c("duchi eps=1 bins=64", "{\"mechanism\":\"duchi\",\"epsilon\":1.0,\"domain_size\":64,\"low\":0.0,\"high\":1.0}", String.format(IV, 64), ""));
    cases.add(c("pem eps=4 bits=32", "{\"mechanism\":\"pem\",\"epsilon\":4.0,\"bits\":32,\"keep\":64,\"eta\":8,\"pool\":256,\"hash_seed\":0}", ints(1L << 32), ""));
    cases.add(c("ps eps=1 d=64 l=4 grr (3-item sets)", "{\"mechanism\":\"ps\",\"epsilon\":1.0,\"domain_size\":64,\"length\":4,\"inner\":\"grr\"}", ints(64), ""));
    cases.add(c("ps eps=1 d=1024 l=4 olh (3-item sets)", "{\"mechanism\":\"ps\",\"epsilon\":1.0,\"domain_size\":1024,\"length\":4,\"inner\":\"olh\"}", ints(1024), ""));
    cases.add(c("setsize eps=1 d=64 L=8 (3-item sets)", "{\"mechanism\":\"setsize\",\"epsilon\":1.0,\"domain_size\":64,\"max_size\":8,\"inner\":\"grr\"}", ints(64), ""));
    cases.add(c("multi eps=2 k=2: grr16 oue32 pm64", "{\"mechanism\":\"multi\",\"epsilon\":2.0,\"domain_size\":32768,\"sample\":2,\"attributes\":[{\"name\":\"a\",\"mechanism\":\"grr\",\"domain_size\":16},{\"name\":\"b\",\"mechanism\":\"oue\",\"domain_size\":32},{\"name\":\"c\",\"mechanism\":\"pm\",\"domain_size\":64,\"low\":0.0,\"high\":1.0}]}",
        "{\"kind\":\"attributes\",\"attributes\":[{\"name\":\"a\",\"kind\":\"integers\",\"low\":0,\"high\":15},{\"name\":\"b\",\"kind\":\"integers\",\"low\":0,\"high\":31},{\"name\":\"c\",\"kind\":\"interval\",\"low\":0.0,\"high\":1.0,\"bins\":64}]}", ""));
    cases.add(c("two-level oue eps=4/1 d=64", "{\"mechanism\":\"oue\",\"epsilon\":4.0,\"domain_size\":64}", ints(64), ",\"memoization\":\"two-level\",\"epsilon_1\":1.0"));
    SecureRandomSource src = new SecureRandomSource();
    System.out.println("mechanism      params                      reports/s   (encode incl.)");
    for (String[] cs : cases) {
      CollectionSpec spec = CollectionSpec.parse(cs[1]);
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
      System.out.printf("%-40s %,12d%n", cs[0], Math.round(n / secs));
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
