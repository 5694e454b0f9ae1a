package org.ldpstream.sdk;

import java.io.IOException;
import java.io.InputStream;
import java.math.BigInteger;
import java.net.HttpURLConnection;
import java.net.URL;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The collection spec model (docs/wire-format.md §1): parsed from the query API's JSON,
 * verified against its fingerprint, and the mapping of raw values to domain indices.
 */
public final class CollectionSpec {
  private static final Pattern ID_RE = Pattern.compile("^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$");
  private static final Set<String> ORACLE_FLOATS =
      new HashSet<>(Arrays.asList("epsilon", "low", "high", "b"));

  public final String id;
  public final String description;
  public final long version;
  public final Map<String, Object> oracleSpec;
  public final Map<String, Object> domain;
  public final String domainKind;
  public final long windowSeconds;
  public final long retentionSeconds;
  public final long minReports;
  /** "none", "permanent" or "two-level". */
  public final String memoization;
  /** epsilon_1 of two-level memoization, else null. */
  public final Double epsilon1;
  public final long reportsPerWindow;
  /** The {@code protocol} of a phase of a set-valued protocol, else null. */
  public final Map<String, Object> protocol;
  /** Phases of each protocol, in order (ldpcore.setvalued.phases.PHASES). */
  public static final Map<String, List<String>> PHASES = new LinkedHashMap<>();

  static {
    PHASES.put("svim", Arrays.asList("candidates", "sizes", "frequencies"));
    PHASES.put("svsm", Arrays.asList("candidates", "sizes", "frequencies", "itemset-sizes",
        "itemsets"));
    PHASES.put("ldpminer", Arrays.asList("candidates", "frequencies"));
  }

  /** SHA-256 prefix of the canonical spec (in every message envelope). */
  public final String fingerprint;
  /** SHA-256 prefix of the canonical oracle spec (in every batch). */
  public final String oracleFingerprint;

  @SuppressWarnings("unchecked")
  private CollectionSpec(Map<String, Object> raw) {
    Object cid = raw.get("id");
    if (!(cid instanceof String) || !ID_RE.matcher((String) cid).matches()) {
      throw new SpecException("collection id must match " + ID_RE + ", got " + cid, "id");
    }
    id = (String) cid;
    description = raw.containsKey("description") ? (String) raw.get("description") : "";
    version = longOf(raw, "version", 1);
    Object oracle = raw.get("oracle");
    if (!(oracle instanceof Map) || !(((Map<String, Object>) oracle).get("mechanism")
        instanceof String)) {
      throw new SpecException("oracle must be an object with a 'mechanism'", "oracle");
    }
    oracleSpec = new LinkedHashMap<>((Map<String, Object>) oracle);
    Object dom = raw.get("domain");
    if (!(dom instanceof Map)) {
      throw new SpecException("domain must be an object", "domain");
    }
    domain = new LinkedHashMap<>((Map<String, Object>) dom);
    domainKind = String.valueOf(domain.get("kind"));
    windowSeconds = longOf(raw, "window_seconds", 3600);
    retentionSeconds = longOf(raw, "retention_seconds", 30 * 86400);
    minReports = longOf(raw, "min_reports", 100);
    memoization = raw.containsKey("memoization") ? (String) raw.get("memoization") : "permanent";
    if (!Arrays.asList("none", "permanent", "two-level").contains(memoization)) {
      throw new SpecException("memoization must be none, permanent or two-level, got "
          + memoization, "memoization");
    }
    Object e1 = raw.get("epsilon_1");
    if (e1 != null && !(e1 instanceof Number)) {
      throw new SpecException("epsilon_1 must be a number, got " + e1, "epsilon_1");
    }
    epsilon1 = e1 == null ? null : ((Number) e1).doubleValue();
    if ("two-level".equals(memoization) != (epsilon1 != null)) {
      throw new SpecException(
          "epsilon_1 is needed with, and only with, memoization 'two-level'", "epsilon_1");
    }
    reportsPerWindow = longOf(raw, "reports_per_window", 1);
    Object proto = raw.get("protocol");
    if (proto != null && !(proto instanceof Map)) {
      throw new SpecException("protocol must be an object", "protocol");
    }
    protocol = proto == null ? null : new LinkedHashMap<>((Map<String, Object>) proto);
    if (reportsPerWindow < 1) {
      throw new SpecException("reports_per_window must be an integer >= 1",
          "reports_per_window");
    }
    if (windowSeconds < 1) {
      throw new SpecException("window_seconds must be an integer >= 1", "window_seconds");
    }
    // The ranges ldpcore accepts, before anything is derived from the spec.
    Limits.checkOracle(oracleSpec, "oracle", null);
    if (epsilon1 != null) {
      Limits.checkEpsilon1(epsilon1);
    }
    fingerprint = Canonical.fingerprint(canonical());
    oracleFingerprint = Canonical.fingerprint(canonicalOracle());
    Object given = raw.get("fingerprint");
    if (given != null && !given.equals(fingerprint)) {
      throw new SpecException("fingerprint " + given + " does not match the spec's "
          + fingerprint + " (a different ldpstream version or an altered spec)", "fingerprint");
    }
    BigInteger expected = "pem".equals(oracleSpec.get("mechanism"))
        ? BigInteger.ONE.shiftLeft(((Number) oracleSpec.get("bits")).intValue())
        : BigInteger.valueOf(((Number) oracleSpec.get("domain_size")).longValue());
    BigInteger have = domainSize();
    if ("attributes".equals(domainKind)) {
      have = have.min(BigInteger.ONE.shiftLeft(62));
    }
    if (!expected.equals(have)) {
      throw new SpecException("oracle.domain_size does not match the domain's "
          + domainSize() + " values", "oracle.domain_size");
    }
  }

  private static long longOf(Map<String, Object> raw, String key, long dflt) {
    Object v = raw.get(key);
    if (v == null) {
      return dflt;
    }
    if (!(v instanceof Long)) {
      throw new SpecException(key + " must be an integer, got " + v, key);
    }
    return (Long) v;
  }

  /** Parse the query API's answer ({@code {"spec": {...}}}) or a bare spec object. */
  @SuppressWarnings("unchecked")
  public static CollectionSpec fromJson(Object parsed) {
    if (!(parsed instanceof Map)) {
      throw new SpecException("a collection must be a JSON object", null);
    }
    Map<String, Object> m = (Map<String, Object>) parsed;
    return new CollectionSpec(m.get("spec") instanceof Map ? (Map<String, Object>) m.get("spec")
        : m);
  }

  /** Parse JSON text (see {@link #fromJson(Object)}). */
  public static CollectionSpec parse(String json) {
    Object parsed;
    try {
      parsed = Json.parse(json);
    } catch (IllegalArgumentException e) {
      throw new SpecException("a collection must be JSON: " + e.getMessage(), null);
    }
    return fromJson(parsed);
  }

  private Map<String, Object> canonicalOracle() {
    return canonicalFloats(oracleSpec);
  }

  /** An oracle spec with its float keys marked, at any depth (multi's attributes, pairs). */
  @SuppressWarnings("unchecked")
  private static Map<String, Object> canonicalFloats(Map<String, Object> spec) {
    Map<String, Object> out = new LinkedHashMap<>();
    for (Map.Entry<String, Object> e : spec.entrySet()) {
      Object v = e.getValue();
      if (ORACLE_FLOATS.contains(e.getKey()) && v instanceof Number) {
        v = new Canonical.PyFloat(((Number) v).doubleValue());
      } else if (v instanceof List) {
        List<Object> l = new java.util.ArrayList<>();
        for (Object x : (List<Object>) v) {
          l.add(x instanceof Map ? canonicalFloats((Map<String, Object>) x) : x);
        }
        v = l;
      }
      out.put(e.getKey(), v);
    }
    return out;
  }

  private static Map<String, Object> canonicalDomain(Map<String, Object> domain) {
    String kind = String.valueOf(domain.get("kind"));
    Map<String, Object> d = new LinkedHashMap<>();
    d.put("kind", kind);
    if ("categories".equals(kind)) {
      d.put("labels", domain.get("labels"));
    } else if ("integers".equals(kind)) {
      d.put("low", domain.get("low"));
      d.put("high", domain.get("high"));
    } else if ("attributes".equals(kind)) {
      List<Object> attrs = new java.util.ArrayList<>();
      for (Map<String, Object> a : attributeDomains(domain)) {
        Map<String, Object> c = canonicalDomain(a);
        c.put("name", a.get("name"));
        attrs.add(c);
      }
      d.put("attributes", attrs);
    } else {
      d.put("low", new Canonical.PyFloat(((Number) domain.get("low")).doubleValue()));
      d.put("high", new Canonical.PyFloat(((Number) domain.get("high")).doubleValue()));
      d.put("bins", domain.get("bins"));
    }
    return d;
  }

  @SuppressWarnings("unchecked")
  private static List<Map<String, Object>> attributeDomains(Map<String, Object> domain) {
    Object a = domain.get("attributes");
    if (!(a instanceof List)) {
      throw new IllegalArgumentException("domain.attributes must be a list of domains");
    }
    return (List<Map<String, Object>>) a;
  }

  /** The canonical object whose hash is the fingerprint (ldpcore's {@code to_dict}). */
  Map<String, Object> canonical() {
    Map<String, Object> d = canonicalDomain(domain);
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("id", id);
    out.put("description", description);
    out.put("version", version);
    out.put("oracle", canonicalOracle());
    out.put("domain", d);
    out.put("window_seconds", windowSeconds);
    out.put("retention_seconds", retentionSeconds);
    out.put("min_reports", minReports);
    if (!"permanent".equals(memoization)) {
      out.put("memoization", memoization);
    }
    if (epsilon1 != null) {
      out.put("epsilon_1", new Canonical.PyFloat(epsilon1));
    }
    if (reportsPerWindow != 1) {
      out.put("reports_per_window", reportsPerWindow);
    }
    if (protocol != null) {
      Map<String, Object> p = new LinkedHashMap<>(protocol);
      p.put("epsilon_total",
          new Canonical.PyFloat(((Number) protocol.get("epsilon_total")).doubleValue()));
      if (protocol.get("fractions") instanceof List) {
        List<Object> fr = new java.util.ArrayList<>();
        for (Object f : (List<?>) protocol.get("fractions")) {
          fr.add(new Canonical.PyFloat(((Number) f).doubleValue()));
        }
        p.put("fractions", fr);
      }
      out.put("protocol", p);
    }
    return out;
  }

  /** True for the set-valued mechanisms (ps, psi, setsize): a value is a set of labels. */
  public boolean setValued() {
    return Arrays.asList("ps", "psi", "setsize").contains(oracleSpec.get("mechanism"));
  }

  /** A set of labels / numbers → its sorted distinct item indices (set-valued collections). */
  public long[] indexSet(Iterable<?> values) {
    java.util.TreeSet<Long> out = new java.util.TreeSet<>();
    for (Object v : values) {
      out.add(index(v));
    }
    long[] a = new long[out.size()];
    int i = 0;
    for (long x : out) {
      a[i++] = x;
    }
    return a;
  }

  /**
   * One device's tuple (a Map name → value, or a List in the attributes' order) → one index
   * per attribute (multi collections).
   */
  public long[] attributeIndices(Object value) {
    if (!"attributes".equals(domainKind)) {
      throw new IllegalArgumentException("not a multi collection");
    }
    List<Map<String, Object>> attrs = attributeDomains(domain);
    List<?> items;
    if (value instanceof Map) {
      Map<?, ?> m = (Map<?, ?>) value;
      List<Object> l = new java.util.ArrayList<>();
      for (Map<String, Object> a : attrs) {
        if (!m.containsKey(a.get("name"))) {
          throw new IllegalArgumentException("a value needs exactly the attributes, missing "
              + a.get("name"));
        }
        l.add(m.get(a.get("name")));
      }
      if (m.size() != attrs.size()) {
        throw new IllegalArgumentException("a value needs exactly the attributes, got "
            + m.keySet());
      }
      items = l;
    } else if (value instanceof List) {
      items = (List<?>) value;
    } else {
      throw new IllegalArgumentException("a multi value must be a Map or a List, got " + value);
    }
    if (items.size() != attrs.size()) {
      throw new IllegalArgumentException("a value needs " + attrs.size() + " values");
    }
    long[] out = new long[attrs.size()];
    for (int j = 0; j < out.length; j++) {
      try {
        out[j] = indexIn(attrs.get(j), items.get(j));
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("attribute " + attrs.get(j).get("name") + ": "
            + e.getMessage());
      }
    }
    return out;
  }

  /** The mixed-radix index of per-attribute indices (attribute 0 most significant). */
  public BigInteger combine(long[] row) {
    BigInteger acc = BigInteger.ZERO;
    List<Map<String, Object>> attrs = attributeDomains(domain);
    for (int j = 0; j < row.length; j++) {
      acc = acc.multiply(sizeOf(attrs.get(j))).add(BigInteger.valueOf(row[j]));
    }
    return acc;
  }

  private static BigInteger big(Object v) {
    return v instanceof BigInteger ? (BigInteger) v : BigInteger.valueOf(((Number) v).longValue());
  }

  /** Number of values of the domain. */
  public BigInteger domainSize() {
    return sizeOf(domain);
  }

  private static BigInteger sizeOf(Map<String, Object> domain) {
    String domainKind = String.valueOf(domain.get("kind"));
    if ("categories".equals(domainKind)) {
      return BigInteger.valueOf(((List<?>) domain.get("labels")).size());
    }
    if ("integers".equals(domainKind)) {
      return big(domain.get("high")).subtract(big(domain.get("low"))).add(BigInteger.ONE);
    }
    if ("attributes".equals(domainKind)) {
      BigInteger n = BigInteger.ONE;
      for (Map<String, Object> a : attributeDomains(domain)) {
        n = n.multiply(sizeOf(a));
      }
      return n;
    }
    return BigInteger.valueOf(((Number) domain.get("bins")).longValue());
  }

  /** The domain index of a label (String) or number; IllegalArgumentException if outside. */
  public long index(Object value) {
    if ("attributes".equals(domainKind)) {
      throw new IllegalArgumentException("a multi collection: use attributeIndices");
    }
    return indexIn(domain, value);
  }

  private static long indexIn(Map<String, Object> domain, Object value) {
    String domainKind = String.valueOf(domain.get("kind"));
    if ("categories".equals(domainKind)) {
      int i = ((List<?>) domain.get("labels")).indexOf(value);
      if (i < 0) {
        throw new IllegalArgumentException("value " + value + " is not one of the labels");
      }
      return i;
    }
    if (!(value instanceof Number)) {
      throw new IllegalArgumentException("numeric domain: give a number, got " + value);
    }
    if ("integers".equals(domainKind)) {
      if (value instanceof Double || value instanceof Float) {
        double d = ((Number) value).doubleValue();
        if (d != Math.rint(d)) {
          throw new IllegalArgumentException("values must be integers");
        }
        value = (long) d;
      }
      BigInteger x = big(value);
      BigInteger lo = big(domain.get("low"));
      if (x.compareTo(lo) < 0 || x.compareTo(big(domain.get("high"))) > 0) {
        throw new IllegalArgumentException("values must be integers in [" + lo + ", "
            + domain.get("high") + "]");
      }
      BigInteger off = x.subtract(lo);
      if (off.bitLength() > 63) {
        throw new IllegalArgumentException("value " + x + " is too far from the domain's low end");
      }
      return off.longValue();
    }
    double x = ((Number) value).doubleValue();
    if (Double.isNaN(x) || Double.isInfinite(x)) {
      throw new IllegalArgumentException("values must be finite numbers");
    }
    double low = ((Number) domain.get("low")).doubleValue();
    double high = ((Number) domain.get("high")).doubleValue();
    long bins = ((Number) domain.get("bins")).longValue();
    double width = (high - low) / bins;
    double idx = Math.floor((x - low) / width);
    return (long) Math.min(Math.max(idx, 0), bins - 1);
  }

  /** A fresh oracle (perturbation and report layout) for this collection. */
  Oracle oracle() {
    return Mechanisms.make(oracleSpec);
  }

  /** Start (epoch seconds) of the tumbling window holding {@code nowSeconds}. */
  public long windowStart(double nowSeconds) {
    long ms = (long) (nowSeconds * 1000);
    long s = floorDiv(ms, 1000L);
    return floorDiv(s, windowSeconds) * windowSeconds;
  }

  private static long floorDiv(long a, long b) {
    long q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
  }

  /** GET {@code {apiUrl}/v1/collections/{id}} and verify the spec against its fingerprint. */
  public static CollectionSpec fetch(String apiUrl, String collection) throws IOException {
    String url = apiUrl.replaceAll("/+$", "") + "/v1/collections/"
        + URLEncoder.encode(collection, "UTF-8");
    HttpURLConnection conn = (HttpURLConnection) new URL(url).openConnection();
    conn.setConnectTimeout(10000);
    conn.setReadTimeout(10000);
    conn.setRequestProperty("Accept", "application/json");
    int status = conn.getResponseCode();
    if (status != 200) {
      throw new IOException("GET " + url + ": HTTP " + status);
    }
    try (InputStream in = conn.getInputStream()) {
      return parse(new String(Io.readAll(in), StandardCharsets.UTF_8));
    } finally {
      conn.disconnect();
    }
  }
}
