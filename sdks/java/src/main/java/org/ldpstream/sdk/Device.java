package org.ldpstream.sdk;

import java.io.IOException;
import java.math.BigInteger;
import java.security.GeneralSecurityException;
import java.security.SecureRandom;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.DoubleSupplier;

/**
 * One device of one collection: maps values to the domain, perturbs, memoizes and keeps the
 * reporting cadence exactly as the Python SDK (producer/sdk.py).
 *
 * <ul>
 *   <li>memoization "permanent": a value's answer is drawn once and resent verbatim;
 *       "two-level": the permanent answer is re-randomized at epsilon_1 for every report;
 *       "none": a fresh answer per report;</li>
 *   <li>cadence: {@link #message} returns null once {@code reports_per_window} messages were
 *       built in the current tumbling window;</li>
 *   <li>persistence: with a memo file (app-private storage) the memo and the cadence are
 *       written atomically after every change, in the Python SDK's format, and reloaded;</li>
 *   <li>randomness: {@link SecureRandom} unless a {@link DrawSource} is given (tests).</li>
 *   <li>set-valued collections (ps, psi, setsize) take a set (any Iterable) of labels, memoized
 *       per set; multi collections a Map attribute → value or a List in the attributes'
 *       order; in a phase of a partitioned protocol (svim, svsm) the device sends only to the
 *       phase {@link #devicePhase} picks from its secret.</li>
 * </ul>
 *
 * <p>Not thread-safe: use one Device per thread or synchronize.
 */
public final class Device {
  public static final String MEMO_FORMAT = "ldpstream-device-memo";
  public static final long MEMO_VERSION = 1;

  private final CollectionSpec spec;
  private final Mechanisms.Oracle oracle;
  private final Mechanisms.Rerandomizer instant;
  private final DrawSource source;
  private final DoubleSupplier clock;
  private final Path memoPath;
  private final TreeMap<BigInteger, Map<String, Object>> memo = new TreeMap<>();
  private Long window;
  private long sentInWindow;
  private byte[] secret;

  /** A device with the platform CSPRNG, the system clock and no persistence. */
  public Device(CollectionSpec spec) throws IOException {
    this(spec, null, null, null);
  }

  /**
   * @param source draws (null: {@link SecureRandomSource})
   * @param memoPath memo file (null: none); reloaded if it exists
   * @param clock seconds since the epoch (null: the system clock)
   */
  public Device(CollectionSpec spec, DrawSource source, Path memoPath, DoubleSupplier clock)
      throws IOException {
    this.spec = spec;
    this.oracle = spec.oracle();
    this.instant = "two-level".equals(spec.memoization)
        ? Mechanisms.rerandomizer(oracle, spec.epsilon1) : null;
    this.source = source != null ? source : new SecureRandomSource();
    this.clock = clock != null ? clock : () -> System.currentTimeMillis() / 1000.0;
    this.memoPath = memoPath;
    if (memoPath != null && Files.exists(memoPath)) {
      load();
    }
  }

  public Mechanisms.Oracle oracle() {
    return oracle;
  }

  /** Set the device secret that picks its phase of a protocol group (default: 16 random
   * bytes drawn when first needed and kept in the memo file). */
  public void setSecret(byte[] secret) {
    this.secret = secret.clone();
  }

  /**
   * The phase (index) of a partitioned protocol group a device takes part in
   * (ldpcore.setvalued.phases.device_phase): u = the first 8 bytes of
   * HMAC-SHA256(secret, group), big-endian, / 2^64; the number of running sums of
   * {@code fractions} that are &lt;= u, capped at the last phase.
   */
  public static int devicePhase(byte[] secret, String group, List<Double> fractions) {
    byte[] mac;
    try {
      javax.crypto.Mac h = javax.crypto.Mac.getInstance("HmacSHA256");
      h.init(new javax.crypto.spec.SecretKeySpec(secret.length == 0 ? new byte[1] : secret,
          "HmacSHA256"));
      mac = h.doFinal(group.getBytes(StandardCharsets.UTF_8));
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 is not available", e);
    }
    double u = new BigInteger(1, java.util.Arrays.copyOf(mac, 8)).doubleValue() / 0x1p64;
    double cum = 0;
    int pos = 0;
    for (double f : fractions) {
      cum += f;
      if (cum <= u) {
        pos++;
      }
    }
    return Math.min(pos, fractions.size() - 1);
  }

  /** False when a partitioned protocol (svim, svsm) puts this device in another phase. */
  public boolean takesPart() throws IOException {
    Map<String, Object> p = spec.protocol;
    if (p == null || !(p.get("fractions") instanceof List)) {
      return true;
    }
    if (secret == null) {
      secret = new byte[16];
      new SecureRandom().nextBytes(secret);
      save();
    }
    List<Double> fr = new ArrayList<>();
    for (Object f : (List<?>) p.get("fractions")) {
      fr.add(((Number) f).doubleValue());
    }
    List<String> phases = CollectionSpec.PHASES.get(String.valueOf(p.get("name")));
    return phases.get(devicePhase(secret, String.valueOf(p.get("group")), fr))
        .equals(p.get("phase"));
  }

  /**
   * The report of a value per the memoization policy: a label / number; for a set-valued
   * collection an Iterable of them (memo key -1 - the bitmask of their indices); for multi a
   * Map or List of attribute values (memo key the mixed-radix index) — as the Python SDK.
   */
  public Map<String, Object> report(Object value) throws IOException {
    long[] items;
    BigInteger key;
    if (spec.setValued()) {
      if (!(value instanceof Iterable)) {
        throw new IllegalArgumentException("a set-valued collection takes a set of labels");
      }
      items = spec.indexSet((Iterable<?>) value);
      BigInteger mask = BigInteger.ZERO;
      for (long i : items) {
        mask = mask.setBit((int) i);
      }
      key = BigInteger.ONE.negate().subtract(mask);
    } else if ("attributes".equals(spec.domainKind)) {
      items = spec.attributeIndices(value);
      key = spec.combine(items);
    } else {
      items = new long[] {spec.index(value)};
      key = BigInteger.valueOf(items[0]);
    }
    if ("none".equals(spec.memoization)) {
      return oracle.perturbItems(items, source);
    }
    Map<String, Object> rep = memo.get(key);
    if (rep == null) {
      rep = oracle.perturbItems(items, source);
      memo.put(key, rep);
      save();
    }
    return instant != null ? instant.rerandomize(rep, source) : rep;
  }

  /** Start (epoch s) of the collection window holding the clock's now. */
  public long currentWindow() {
    return spec.windowStart(clock.getAsDouble());
  }

  /** True unless the cadence is used up in the current window. */
  public boolean canReport() {
    Long w = currentWindow();
    return !w.equals(window) || sentInWindow < spec.reportsPerWindow;
  }

  /** The binary message of one report, or null when the window's cadence is used up. */
  public byte[] message(Object value) throws IOException {
    Map<String, Object> rep = next(value);
    return rep == null ? null
        : Encoding.binary(spec, oracle.columns(), Collections.singletonList(rep));
  }

  /** The JSON message text of one report, or null when the cadence is used up. */
  public String messageJson(Object value) throws IOException {
    Map<String, Object> rep = next(value);
    return rep == null ? null
        : Encoding.json(spec, oracle.columns(), Collections.singletonList(rep));
  }

  private Map<String, Object> next(Object value) throws IOException {
    long w = currentWindow();
    boolean same = window != null && window == w;
    if (same && sentInWindow >= spec.reportsPerWindow) {
      return null;
    }
    if (!takesPart()) {
      return null;
    }
    Map<String, Object> rep = report(value);
    sentInWindow = same ? sentInWindow + 1 : 1;
    window = w;
    save();
    return rep;
  }

  // ---- persistence ---------------------------------------------------------------------
  @SuppressWarnings("unchecked")
  private Map<String, Object> readDoc() throws IOException {
    if (memoPath == null || !Files.exists(memoPath)) {
      Map<String, Object> doc = new LinkedHashMap<>();
      doc.put("format", MEMO_FORMAT);
      doc.put("version", MEMO_VERSION);
      doc.put("collections", new LinkedHashMap<String, Object>());
      return doc;
    }
    Object doc = Json.parse(new String(Files.readAllBytes(memoPath), StandardCharsets.UTF_8));
    if (!(doc instanceof Map) || !MEMO_FORMAT.equals(((Map<String, Object>) doc).get("format"))
        || !Long.valueOf(MEMO_VERSION).equals(((Map<String, Object>) doc).get("version"))
        || !(((Map<String, Object>) doc).get("collections") instanceof Map)) {
      throw new IOException(memoPath + " is not a " + MEMO_FORMAT + " v1 file");
    }
    return (Map<String, Object>) doc;
  }

  @SuppressWarnings("unchecked")
  private void save() throws IOException {
    if (memoPath == null) {
      return;
    }
    Map<String, Object> doc = readDoc();
    Map<String, Object> answers = new LinkedHashMap<>();
    List<Map<String, Object>> reps = new ArrayList<>(memo.values());
    List<Map<String, Object>> recs = Encoding.records(spec, oracle.columns(), reps);
    int i = 0;
    for (BigInteger k : memo.keySet()) {
      answers.put(String.valueOf(k), recs.get(i++));
    }
    Map<String, Object> entry = new LinkedHashMap<>();
    entry.put("collection", spec.id);
    entry.put("memoization", spec.memoization);
    entry.put("answers", answers);
    entry.put("window", window);
    entry.put("sent", sentInWindow);
    if (secret != null) {
      StringBuilder hex = new StringBuilder();
      for (byte b : secret) {
        hex.append(String.format("%02x", b & 0xff));
      }
      entry.put("secret", hex.toString());
    }
    ((Map<String, Object>) doc.get("collections")).put(spec.fingerprint, entry);
    Path dir = memoPath.toAbsolutePath().getParent();
    Files.createDirectories(dir);
    Path tmp = Files.createTempFile(dir, ".memo-", ".tmp");
    try {
      Files.write(tmp, Json.write(doc).getBytes(StandardCharsets.UTF_8));
      try {
        Files.setPosixFilePermissions(tmp,
            java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
      } catch (UnsupportedOperationException e) {
        // not a POSIX file system (app-private storage is private anyway)
      }
      Files.move(tmp, memoPath, StandardCopyOption.REPLACE_EXISTING,
          StandardCopyOption.ATOMIC_MOVE);
    } finally {
      Files.deleteIfExists(tmp);
    }
  }

  @SuppressWarnings("unchecked")
  private void load() throws IOException {
    Object e = ((Map<String, Object>) readDoc().get("collections")).get(spec.fingerprint);
    if (e == null) {
      return;
    }
    Map<String, Object> entry = (Map<String, Object>) e;
    BigInteger size = spec.domainSize();
    for (Map.Entry<String, Object> a : ((Map<String, Object>) entry.get("answers")).entrySet()) {
      BigInteger idx = new BigInteger(a.getKey());
      Map<String, Object> rec = (Map<String, Object>) a.getValue();
      boolean fits = idx.signum() < 0 ? spec.setValued() : idx.compareTo(size) < 0;
      if (!fits || !spec.oracleFingerprint.equals(rec.get("fingerprint"))) {
        throw new IOException("memo entry " + idx + " does not fit collection " + spec.id);
      }
      memo.put(idx, Encoding.fromRecord(oracle.columns(), rec));
    }
    window = (Long) entry.get("window");
    sentInWindow = (Long) entry.get("sent");
    Object hex = entry.get("secret");
    if (secret == null && hex instanceof String) {
      String h = (String) hex;
      secret = new byte[h.length() / 2];
      for (int i = 0; i < secret.length; i++) {
        secret[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
      }
    }
  }
}
