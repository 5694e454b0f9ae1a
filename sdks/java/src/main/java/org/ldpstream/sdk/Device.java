package org.ldpstream.sdk;

import java.io.IOException;
import java.math.BigInteger;
import java.nio.charset.Charset;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import javax.crypto.Mac;

/**
 * One device of one collection: maps values to the domain, perturbs, keeps the reporting
 * cadence and queues reports, as the Python SDK (producer/sdk.py).
 *
 * <ul>
 *   <li>memoization "permanent": a value's answer is <em>derived</em> from the device secret
 *       (HMAC-SHA256 over the collection fingerprint and the value; docs/wire-format.md,
 *       "Permanent answers"), so it is the same after every restart and in every SDK, with
 *       nothing stored but the secret; "two-level": that answer re-randomized at epsilon_1 for
 *       every report; "none": a fresh answer per report;</li>
 *   <li>cadence: at most {@code reports_per_window} reports per tumbling window, counted in
 *       the store (shared by every Device, thread and process on it);</li>
 *   <li>store: the secret, the cadence and the outbox live in the platform's private store
 *       ({@link DeviceStore#defaultStore()}); a {@link MemoryStore} opts out;</li>
 *   <li>randomness: {@link SecureRandom} only;</li>
 *   <li>set-valued collections (ps, psi, setsize) take a set (any Iterable) of labels; multi
 *       collections a Map attribute → value or a List in the attributes' order; in a phase of a
 *       partitioned protocol (svim, svsm) the device reports only to the phase its secret
 *       picks.</li>
 * </ul>
 *
 * <p>Thread-safe. Blocking (file I/O): call it off the UI thread.
 */
public final class Device {
  private static final Charset UTF8 = Charset.forName("UTF-8");

  /** Seconds since the epoch. */
  public interface Clock {
    double nowSeconds();
  }

  private final CollectionSpec spec;
  private final Oracle oracle;
  private final Rerandomizer instant;
  private final DrawSource draws;
  private final boolean testDraws;
  private final Clock clock;
  private final DeviceStore store;
  private final Map<String, Map<String, Object>> answers =
      new ConcurrentHashMap<String, Map<String, Object>>();
  private volatile byte[] secret;

  /** A device on the platform's private store ({@link DeviceStore#defaultStore()}). */
  public Device(CollectionSpec spec) {
    this(builder(spec));
  }

  private Device(Builder b) {
    this.spec = b.spec;
    this.oracle = spec.oracle();
    this.instant = "two-level".equals(spec.memoization)
        ? Mechanisms.rerandomizer(oracle, spec.epsilon1) : null;
    this.testDraws = b.draws != null;
    this.draws = b.draws != null ? b.draws : new SecureRandomSource();
    this.clock = b.clock != null ? b.clock : new Clock() {
      @Override
      public double nowSeconds() {
        return System.currentTimeMillis() / 1000.0;
      }
    };
    this.store = b.store != null ? b.store : DeviceStore.defaultStore();
    this.secret = b.secret;
  }

  /** Options of a Device: {@code Device.builder(spec).store(...).build()}. */
  public static Builder builder(CollectionSpec spec) {
    return new Builder(spec);
  }

  /** Builds a {@link Device}. */
  public static final class Builder {
    private final CollectionSpec spec;
    private DeviceStore store;
    private Clock clock;
    private byte[] secret;
    private DrawSource draws;

    private Builder(CollectionSpec spec) {
      if (spec == null) {
        throw new NullPointerException("spec");
      }
      this.spec = spec;
    }

    /** Where the secret, the cadence and the queue live (default
     * {@link DeviceStore#defaultStore()}); a {@link MemoryStore} opts out of persistence (see
     * the README for what that gives up). */
    public Builder store(DeviceStore store) {
      this.store = store;
      return this;
    }

    /** The clock that decides the window (default the system clock). */
    public Builder clock(Clock clock) {
      this.clock = clock;
      return this;
    }

    /** The device secret (16 to 64 bytes) instead of the store's: an app that keeps it in its
     * own keystore. */
    public Builder secret(byte[] secret) {
      if (secret.length < 16 || secret.length > 64) {
        throw new IllegalArgumentException("secret must be 16 to 64 bytes");
      }
      this.secret = secret.clone();
      return this;
    }

    /** Tests only (package-private): fresh draws, and a new secret, from this source. */
    Builder testOnlyDraws(DrawSource draws) {
      this.draws = draws;
      return this;
    }

    public Device build() {
      return new Device(this);
    }
  }

  /** The collection. */
  public CollectionSpec spec() {
    return spec;
  }

  /** The store this device keeps its state in. */
  public DeviceStore store() {
    return store;
  }

  /** The device secret (the store's, drawn on first use, unless one was given). */
  byte[] secret() throws IOException {
    byte[] s = secret;
    if (s == null) {
      final DrawSource t = testDraws ? draws : null;
      String hex = store.update(new DeviceStore.Update<String>() {
        @Override
        public String apply(Map<String, Object> doc) throws IOException {
          return DeviceStore.ensureSecret(doc, t);
        }
      });
      s = Hex.decode(hex);
      secret = s;
    }
    return s;
  }

  /**
   * The phase (index) of a partitioned protocol group a device takes part in
   * (ldpcore.setvalued.phases.device_phase): u = the first 8 bytes of
   * HMAC-SHA256(secret, group), big-endian, / 2^64; the number of running sums of
   * {@code fractions} that are &lt;= u, capped at the last phase.
   */
  static int devicePhase(byte[] secret, String group, List<Double> fractions) {
    Mac h = PermanentWords.hmac(secret.length == 0 ? new byte[1] : secret);
    byte[] mac = h.doFinal(group.getBytes(UTF8));
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
    List<Double> fr = new ArrayList<>();
    for (Object f : (List<?>) p.get("fractions")) {
      fr.add(((Number) f).doubleValue());
    }
    List<String> phases = CollectionSpec.PHASES.get(String.valueOf(p.get("name")));
    return phases.get(devicePhase(secret(), String.valueOf(p.get("group")), fr))
        .equals(p.get("phase"));
  }

  /** The oracle's input and the memo key of a raw value: a domain index; for a set the item
   * indices (key -1 - their bitmask); for a tuple its indices (key the mixed-radix index). */
  private Object[] input(Object value) {
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
    return new Object[] {items, key.toString()};
  }

  /** The permanent answer of a value (a report: column → Long, or int[] of set bits),
   * derived from the secret, the collection's fingerprint and the value. */
  public Map<String, Object> permanent(Object value) throws IOException {
    Object[] in = input(value);
    String key = (String) in[1];
    Map<String, Object> rep = answers.get(key);
    if (rep == null) {
      rep = oracle.perturbItems((long[]) in[0],
          new PermanentWords(secret(), spec.fingerprint, key));
      answers.put(key, rep);
    }
    return rep;
  }

  /**
   * The report of a value per the memoization policy (it does not count toward the cadence):
   * a label / number; for a set-valued collection an Iterable of them; for multi a Map or List
   * of attribute values. Column → Long, or int[] of the set bits of a bitmask column.
   */
  public Map<String, Object> report(Object value) throws IOException {
    if ("none".equals(spec.memoization)) {
      synchronized (draws) {
        return oracle.perturbItems((long[]) input(value)[0], draws);
      }
    }
    Map<String, Object> rep = permanent(value);
    if (instant == null) {
      return rep;
    }
    synchronized (draws) {
      return instant.rerandomize(rep, draws);
    }
  }

  /** Start (epoch s) of the collection window holding the clock's now. */
  public long currentWindow() {
    return spec.windowStart(clock.nowSeconds());
  }

  @SuppressWarnings("unchecked")
  private Map<String, Object> cadence(Map<String, Object> doc) {
    Object c = ((Map<String, Object>) doc.get("collections")).get(spec.fingerprint);
    if (c instanceof Map) {
      return (Map<String, Object>) c;
    }
    Map<String, Object> fresh = new LinkedHashMap<>();
    fresh.put("collection", spec.id);
    fresh.put("window", null);
    fresh.put("sent", 0L);
    return fresh;
  }

  private boolean allowed(Map<String, Object> c, long window) {
    Object w = c.get("window");
    long sent = ((Number) c.get("sent")).longValue();
    return !(w instanceof Number && ((Number) w).longValue() == window)
        || sent < spec.reportsPerWindow;
  }

  /** True unless the cadence is used up in the current window. */
  public boolean canReport() throws IOException {
    final long window = currentWindow();
    return store.update(new DeviceStore.Update<Boolean>() {
      @Override
      public Boolean apply(Map<String, Object> doc) {
        return allowed(cadence(doc), window);
      }
    });
  }

  /** Spend one report of {@code window}'s cadence in the store, atomically with {@code then}. */
  private boolean spend(final long window, final Map<String, Object> queued) throws IOException {
    return store.update(new DeviceStore.Update<Boolean>() {
      @Override
      @SuppressWarnings("unchecked")
      public Boolean apply(Map<String, Object> doc) {
        Map<String, Object> c = cadence(doc);
        if (!allowed(c, window)) {
          return false;
        }
        Object w = c.get("window");
        boolean same = w instanceof Number && ((Number) w).longValue() == window;
        Map<String, Object> next = new LinkedHashMap<>(c);
        next.put("collection", spec.id);
        next.put("window", window);
        next.put("sent", same ? ((Number) c.get("sent")).longValue() + 1 : 1L);
        ((Map<String, Object>) doc.get("collections")).put(spec.fingerprint, next);
        if (queued != null) {
          DeviceStore.push(doc, queued, store.queueLimit());
        }
        return true;
      }
    });
  }

  private Object make(Object value, boolean json) throws IOException {
    if (!canReport() || !takesPart()) {
      return null;
    }
    List<Map<String, Object>> one = Collections.singletonList(report(value));
    return json ? Encoding.json(spec, oracle.columns(), one)
        : Encoding.binary(spec, oracle.columns(), one);
  }

  /** The binary message of one report (the cadence spent), or null when the window's cadence
   * is used up (or the device is in another phase). Not queued: see {@link #enqueue}. */
  public byte[] message(Object value) throws IOException {
    long window = currentWindow();
    Object m = make(value, false);
    return m != null && spend(window, null) ? (byte[]) m : null;
  }

  /** The JSON message text of one report, or null when the cadence is used up. */
  public String messageJson(Object value) throws IOException {
    long window = currentWindow();
    Object m = make(value, true);
    return m != null && spend(window, null) ? (String) m : null;
  }

  /**
   * Make one binary report and queue it in the store, in one step (the cadence is spent when
   * the report is made; it is never perturbed again); false when the cadence is used up. The
   * queue is posted by {@link GatewayClient#sendQueued}, which forgets a report only once the
   * gateway acknowledged it.
   */
  public boolean enqueue(Object value) throws IOException {
    return enqueue(value, false);
  }

  /** {@link #enqueue(Object)} with a JSON message ({@code json} true) or binary. */
  public boolean enqueue(Object value, boolean json) throws IOException {
    long window = currentWindow();
    Object m = make(value, json);
    if (m == null) {
      return false;
    }
    byte[] body = json ? ((String) m).getBytes(UTF8) : (byte[]) m;
    Map<String, Object> entry = new LinkedHashMap<>();
    entry.put("key", java.util.UUID.randomUUID().toString());
    entry.put("collection", spec.id);
    entry.put("fingerprint", spec.fingerprint);
    entry.put("type", json ? "application/json" : "application/octet-stream");
    entry.put("body", Hex.encode(body));
    entry.put("window", window);
    return spend(window, entry);
  }
}
