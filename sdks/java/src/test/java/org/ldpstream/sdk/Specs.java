package org.ldpstream.sdk;

/** The collection specs the tests use, built from the parts that vary between them. */
final class Specs {
  private Specs() {}

  /** {@code {"id":…,"oracle":…,"domain":…}} and {@code more} fields (each led by a comma). */
  static CollectionSpec collection(String id, String oracle, String domain, String more) {
    return CollectionSpec.parse("{\"id\":\"" + id + "\",\"oracle\":" + oracle + ",\"domain\":"
        + domain + more + "}");
  }

  /** A mechanism at {@code epsilon} (a number, or a JSON literal) over {@code d} values. */
  static String oracle(String mechanism, Object epsilon, long d, String more) {
    return "{\"mechanism\":\"" + mechanism + "\",\"epsilon\":" + epsilon + ",\"domain_size\":"
        + d + more + "}";
  }

  /** The integers 0 .. n-1. */
  static String integers(long n) {
    return "{\"kind\":\"integers\",\"low\":0,\"high\":" + (n - 1) + "}";
  }

  static String categories(String... labels) {
    StringBuilder b = new StringBuilder("{\"kind\":\"categories\",\"labels\":[");
    for (int i = 0; i < labels.length; i++) {
      b.append(i > 0 ? ",\"" : "\"").append(labels[i]).append('"');
    }
    return b.append("]}").toString();
  }
}
