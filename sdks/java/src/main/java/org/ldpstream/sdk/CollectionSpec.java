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
  /** SHA-256 prefix of the canonical spec (in every message envelope). */
  public final String fingerprint;
  /** SHA-256 prefix of the canonical oracle spec (in every batch). */
  public final String oracleFingerprint;

  @SuppressWarnings("unchecked")
  private CollectionSpec(Map<String, Object> raw) {
    Object cid = raw.get("id");
    if (!(cid instanceof String) || !ID_RE.matcher((String) cid).matches()) {
      throw new IllegalArgumentException("collection id must match " + ID_RE + ", got " + cid);
    }
    id = (String) cid;
    description = raw.containsKey("description") ? (String) raw.get("description") : "";
    version = longOf(raw, "version", 1);
    Object oracle = raw.get("oracle");
    if (!(oracle instanceof Map) || !(((Map<String, Object>) oracle).get("mechanism")
        instanceof String)) {
      throw new IllegalArgumentException("oracle must be an object with a 'mechanism'");
    }
    oracleSpec = new LinkedHashMap<>((Map<String, Object>) oracle);
    Object dom = raw.get("domain");
    if (!(dom instanceof Map)) {
      throw new IllegalArgumentException("domain must be an object");
    }
    domain = new LinkedHashMap<>((Map<String, Object>) dom);
    domainKind = String.valueOf(domain.get("kind"));
    windowSeconds = longOf(raw, "window_seconds", 3600);
    retentionSeconds = longOf(raw, "retention_seconds", 30 * 86400);
    minReports = longOf(raw, "min_reports", 100);
    memoization = raw.containsKey("memoization") ? (String) raw.get("memoization") : "permanent";
    if (!Arrays.asList("none", "permanent", "two-level").contains(memoization)) {
      throw new IllegalArgumentException("memoization must be none, permanent or two-level, got "
          + memoization);
    }
    epsilon1 = raw.get("epsilon_1") == null ? null : ((Number) raw.get("epsilon_1")).doubleValue();
    if ("two-level".equals(memoization) != (epsilon1 != null)) {
      throw new IllegalArgumentException(
          "epsilon_1 is needed with, and only with, memoization 'two-level'");
    }
    reportsPerWindow = longOf(raw, "reports_per_window", 1);
    if (reportsPerWindow < 1) {
      throw new IllegalArgumentException("reports_per_window must be an integer >= 1");
    }
    fingerprint = Canonical.fingerprint(canonical());
    oracleFingerprint = Canonical.fingerprint(canonicalOracle());
    Object given = raw.get("fingerprint");
    if (given != null && !given.equals(fingerprint)) {
      throw new IllegalArgumentException("fingerprint " + given + " does not match the spec's "
          + fingerprint + " (a different ldpstream version or an altered spec)");
    }
    BigInteger expected = "pem".equals(oracleSpec.get("mechanism"))
        ? BigInteger.ONE.shiftLeft(((Number) oracleSpec.get("bits")).intValue())
        : BigInteger.valueOf(((Number) oracleSpec.get("domain_size")).longValue());
    if (!expected.equals(domainSize())) {
      throw new IllegalArgumentException("oracle.domain_size does not match the domain's "
          + domainSize() + " values");
    }
  }

  private static long longOf(Map<String, Object> raw, String key, long dflt) {
    Object v = raw.get(key);
    if (v == null) {
      return dflt;
    }
    if (!(v instanceof Long)) {
      throw new IllegalArgumentException(key + " must be an integer, got " + v);
    }
    return (Long) v;
  }

  /** Parse the query API's answer ({@code {"spec": {...}}}) or a bare spec object. */
  @SuppressWarnings("unchecked")
  public static CollectionSpec fromJson(Object parsed) {
    if (!(parsed instanceof Map)) {
      throw new IllegalArgumentException("a collection must be a JSON object");
    }
    Map<String, Object> m = (Map<String, Object>) parsed;
    return new CollectionSpec(m.get("spec") instanceof Map ? (Map<String, Object>) m.get("spec")
        : m);
  }

  /** Parse JSON text (see {@link #fromJson(Object)}). */
  public static CollectionSpec parse(String json) {
    return fromJson(Json.parse(json));
  }

  private Map<String, Object> canonicalOracle() {
    Map<String, Object> out = new LinkedHashMap<>();
    for (Map.Entry<String, Object> e : oracleSpec.entrySet()) {
      Object v = e.getValue();
      out.put(e.getKey(), ORACLE_FLOATS.contains(e.getKey()) && v instanceof Number
          ? new Canonical.PyFloat(((Number) v).doubleValue()) : v);
    }
    return out;
  }

  /** The canonical object whose hash is the fingerprint (ldpcore's {@code to_dict}). */
  public Map<String, Object> canonical() {
    Map<String, Object> d = new LinkedHashMap<>();
    d.put("kind", domainKind);
    if ("categories".equals(domainKind)) {
      d.put("labels", domain.get("labels"));
    } else if ("integers".equals(domainKind)) {
      d.put("low", domain.get("low"));
      d.put("high", domain.get("high"));
    } else {
      d.put("low", new Canonical.PyFloat(((Number) domain.get("low")).doubleValue()));
      d.put("high", new Canonical.PyFloat(((Number) domain.get("high")).doubleValue()));
      d.put("bins", domain.get("bins"));
    }
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
    return out;
  }

  private static BigInteger big(Object v) {
    return v instanceof BigInteger ? (BigInteger) v : BigInteger.valueOf(((Number) v).longValue());
  }

  /** Number of values of the domain. */
  public BigInteger domainSize() {
    if ("categories".equals(domainKind)) {
      return BigInteger.valueOf(((List<?>) domain.get("labels")).size());
    }
    if ("integers".equals(domainKind)) {
      return big(domain.get("high")).subtract(big(domain.get("low"))).add(BigInteger.ONE);
    }
    return BigInteger.valueOf(((Number) domain.get("bins")).longValue());
  }

  /** The domain index of a label (String) or number; IllegalArgumentException if outside. */
  public long index(Object value) {
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
      return x.subtract(lo).longValueExact();
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
  public Mechanisms.Oracle oracle() {
    return Mechanisms.make(oracleSpec);
  }

  /** Start (epoch seconds) of the tumbling window holding {@code nowSeconds}. */
  public long windowStart(double nowSeconds) {
    long ms = (long) (nowSeconds * 1000);
    return Math.floorDiv(Math.floorDiv(ms, 1000L), windowSeconds) * windowSeconds;
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
