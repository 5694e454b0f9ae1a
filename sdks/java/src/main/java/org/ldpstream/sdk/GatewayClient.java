package org.ldpstream.sdk;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.charset.Charset;
import java.text.ParseException;
import java.text.SimpleDateFormat;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TimeZone;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Gateway client: {@code POST /v1/reports} over {@link HttpURLConnection} (Android and JVM),
 * with retries, an {@code Idempotency-Key} per request, and the device's durable queue
 * ({@link #sendQueued}).
 *
 * <p>Retried: network errors (full-jitter exponential backoff), 429, 502, 503 and 504 — after
 * exactly the {@code Retry-After} the gateway states (seconds or an HTTP date) when it is at
 * most {@link #maxWaitMs}, else a {@link GatewayException} with {@code retryAfterMs} at once:
 * never earlier than asked. Never retried: any other status (a 4xx means the message itself
 * is wrong). Blocking: call it off the UI thread.
 */
public final class GatewayClient {
  private static final Charset UTF8 = Charset.forName("UTF-8");

  /** Sleeps between attempts (replaceable in tests). */
  public interface Sleeper {
    void sleep(long millis) throws InterruptedException;
  }

  private final String url;
  private final String apiKey;
  private int maxRetries = 5;
  private long baseDelayMs = 200;
  private long maxDelayMs = 30000;
  private long maxWaitMs = 60000;
  private int timeoutMs = 10000;
  private Sleeper sleeper = new Sleeper() {
    @Override
    public void sleep(long millis) throws InterruptedException {
      Thread.sleep(millis);
    }
  };
  private PrivacyPass.Wallet wallet;

  /** @param apiKey the fleet's device key ({@code Authorization: Bearer}), or null */
  public GatewayClient(String baseUrl, String apiKey) {
    this.url = baseUrl.replaceAll("/+$", "") + "/v1/reports";
    this.apiKey = apiKey;
  }

  /** Retries after the first attempt (default 5). */
  public GatewayClient maxRetries(int n) {
    maxRetries = n;
    return this;
  }

  /** Backoff after network errors: first delay and cap, ms (default 200 and 30000). */
  public GatewayClient backoff(long baseMs, long maxMs) {
    baseDelayMs = baseMs;
    maxDelayMs = maxMs;
    return this;
  }

  /** Longest Retry-After (ms) waited through before retrying (default 60000); a longer one
   * ends the call ({@link #sendQueued} keeps it in the store). */
  public GatewayClient maxWaitMs(long ms) {
    maxWaitMs = ms;
    return this;
  }

  public GatewayClient timeoutMs(int ms) {
    timeoutMs = ms;
    return this;
  }

  public GatewayClient sleeper(Sleeper s) {
    sleeper = s;
    return this;
  }

  /** The result of an accepted POST. */
  public static final class Accepted {
    public final long messages;
    public final long reports;

    Accepted(long messages, long reports) {
      this.messages = messages;
      this.reports = reports;
    }
  }

  /** What {@link #sendQueued} did. */
  public static final class QueueResult {
    /** Reports the gateway accepted (and the queue forgot). */
    public final long sent;
    /** Reports the gateway refused for good (a 4xx): forgotten, and counted in the store. */
    public final long refused;
    /** Reports still queued. */
    public final long pending;
    /** Reports dropped so far because the queue was full (the store's counter). */
    public final long dropped;
    /** Epoch ms before which the gateway asked not to be called, or -1. */
    public final long notBeforeMs;

    QueueResult(long sent, long refused, long pending, long dropped, long notBeforeMs) {
      this.sent = sent;
      this.refused = refused;
      this.pending = pending;
      this.dropped = dropped;
      this.notBeforeMs = notBeforeMs;
    }
  }

  /**
   * Privacy Pass (docs/privacy-pass.md): every report then carries a token of its (collection,
   * window), obtained from the issuer at {@code issuerUrl}, cached and redeemed here.
   * {@code deviceSecret}: the device's persistent secret (the issuer sees only an HMAC of it
   * and counts the quota against it).  The fleet key for the issuer is this client's key.
   * (Queued reports, {@link #sendQueued}, are posted without tokens.)
   */
  public GatewayClient tokens(String issuerUrl, byte[] deviceSecret) {
    this.wallet = new PrivacyPass.Wallet(issuerUrl, deviceSecret, apiKey);
    return this;
  }

  /** Send one binary message. */
  public Accepted send(byte[] message) throws IOException {
    if (wallet != null) {
      return sendTokened(java.util.Collections.singletonList(message), 0);
    }
    return post("application/octet-stream", message, null, null);
  }

  /** Send several binary messages as one {@code application/x-ldp-frames} body (with tokens:
   * {@code application/x-ldp-token-frames}). */
  public Accepted send(List<byte[]> messages) throws IOException {
    if (wallet != null) {
      return sendTokened(messages, 0);
    }
    return post("application/x-ldp-frames", Encoding.frames(messages), null, null);
  }

  /** Send JSON message texts (one, or several as a JSON array); with tokens, each message
   * gets its {@code tokens}. */
  @SuppressWarnings("unchecked")
  public Accepted sendJson(List<String> messages) throws IOException {
    if (wallet != null) {
      long nowS = System.currentTimeMillis() / 1000;
      List<String> out = new ArrayList<>();
      for (String m : messages) {
        Map<String, Object> obj = new LinkedHashMap<>((Map<String, Object>) Json.parse(m));
        int n = ((List<?>) obj.get("reports")).size();
        List<String> toks = new ArrayList<>();
        for (byte[] t : wallet.take((String) obj.get("collection"), n, nowS, null)) {
          toks.add(PrivacyPass.b64url(t));
        }
        obj.put("tokens", toks);
        out.add(Json.write(obj));
      }
      messages = out;
    }
    StringBuilder b = new StringBuilder();
    if (messages.size() == 1) {
      b.append(messages.get(0));
    } else {
      b.append('[');
      for (int i = 0; i < messages.size(); i++) {
        b.append(i > 0 ? "," : "").append(messages.get(i));
      }
      b.append(']');
    }
    return post("application/json", b.toString().getBytes(UTF8), null, null);
  }

  private Accepted sendTokened(List<byte[]> messages, int shift) throws IOException {
    long nowS = System.currentTimeMillis() / 1000;
    List<List<byte[]>> tokens = new ArrayList<>();
    for (byte[] m : messages) {
      Object[] head = PrivacyPass.messageHead(m);
      String cid = (String) head[0];
      long[] w = wallet.window(cid, nowS, null);
      Long want = shift == 0 ? null : w[0] + shift * w[1];
      tokens.add(wallet.take(cid, (int) (long) (Long) head[1], nowS, want));
    }
    try {
      if (messages.size() == 1 && tokens.get(0).size() == 1) {
        return post("application/octet-stream", messages.get(0), null,
            PrivacyPass.authorizationHeader(tokens.get(0).get(0)));
      }
      return post("application/x-ldp-token-frames", PrivacyPass.tokenFrames(tokens, messages),
          null, null);
    } catch (GatewayException e) {
      // the gateway's clock puts the reports in the neighbouring window: once, with its tokens
      if (shift == 0 && ("token_window".equals(e.reason)
          || "token_key_expired".equals(e.reason))) {
        return sendTokened(messages, "token_key_expired".equals(e.reason) ? 1 : -1);
      }
      throw e;
    }
  }

  /**
   * Post the reports {@link Device#enqueue} queued in {@code store}, oldest first, one request
   * each under the report's own Idempotency-Key. A report leaves the queue only once the
   * gateway accepted it, or refused it for good (4xx: counted in {@code refused}). Stops at
   * the first network failure or 429/503; a Retry-After longer than {@link #maxWaitMs} is kept
   * in the store, and no request is made before it passes.
   */
  public QueueResult sendQueued(DeviceStore store) throws IOException {
    return sendQueued(store, System.currentTimeMillis());
  }

  /** {@link #sendQueued(DeviceStore)} at the given time (epoch ms). */
  @SuppressWarnings("unchecked")
  public QueueResult sendQueued(DeviceStore store, long nowMs) throws IOException {
    Map<String, Object> doc = store.update(new DeviceStore.Update<Map<String, Object>>() {
      @Override
      public Map<String, Object> apply(Map<String, Object> d) {
        Map<String, Object> copy = new LinkedHashMap<>(d);
        copy.put("outbox", new ArrayList<Object>((List<Object>) d.get("outbox")));
        return copy;
      }
    });
    long sent = 0;
    long refused = 0;
    Object nb = doc.get("not_before");
    long notBefore = nb instanceof Number ? Math.round(((Number) nb).doubleValue() * 1000) : -1;
    if (notBefore < 0 || nowMs >= notBefore) {
      if (notBefore >= 0) {
        setNotBefore(store, null);
      }
      for (Object o : (List<Object>) doc.get("outbox")) {
        Map<String, Object> e = (Map<String, Object>) o;
        final String key = (String) e.get("key");
        try {
          post((String) e.get("type"), Hex.decode((String) e.get("body")), key, null);
        } catch (GatewayException ex) {
          if (ex.status < 0 || retryable(ex.status)) {
            if (ex.retryAfterMs >= 0) {
              setNotBefore(store, (nowMs + ex.retryAfterMs) / 1000.0);
            }
            break;
          }
          refused++;
          forget(store, key, true);
          continue;
        }
        sent++;
        forget(store, key, false);
      }
    }
    final long s = sent;
    final long r = refused;
    return store.update(new DeviceStore.Update<QueueResult>() {
      @Override
      public QueueResult apply(Map<String, Object> d) {
        Object n = d.get("not_before");
        return new QueueResult(s, r, ((List<Object>) d.get("outbox")).size(),
            ((Number) d.get("dropped")).longValue(),
            n instanceof Number ? Math.round(((Number) n).doubleValue() * 1000) : -1);
      }
    });
  }

  private static void setNotBefore(DeviceStore store, final Double seconds) throws IOException {
    store.update(new DeviceStore.Update<Void>() {
      @Override
      public Void apply(Map<String, Object> d) {
        d.put("not_before", seconds);
        return null;
      }
    });
  }

  private static void forget(DeviceStore store, final String key, final boolean refused)
      throws IOException {
    store.update(new DeviceStore.Update<Void>() {
      @Override
      @SuppressWarnings("unchecked")
      public Void apply(Map<String, Object> d) {
        List<Object> keep = new ArrayList<>();
        for (Object e : (List<Object>) d.get("outbox")) {
          if (!key.equals(((Map<String, Object>) e).get("key"))) {
            keep.add(e);
          }
        }
        d.put("outbox", keep);
        if (refused) {
          d.put("refused", ((Number) d.get("refused")).longValue() + 1);
        }
        return null;
      }
    });
  }

  /** Retry-After in ms (seconds or an HTTP date), or -1. */
  public static long retryAfterMs(String value, long nowMs) {
    if (value == null || value.trim().isEmpty()) {
      return -1;
    }
    String s = value.trim();
    if (s.matches("\\d+(\\.\\d+)?")) {
      return Math.round(Double.parseDouble(s) * 1000);
    }
    SimpleDateFormat http = new SimpleDateFormat("EEE, dd MMM yyyy HH:mm:ss zzz", Locale.US);
    http.setTimeZone(TimeZone.getTimeZone("GMT"));
    try {
      return Math.max(0, http.parse(s).getTime() - nowMs);
    } catch (ParseException e) {
      return -1;
    }
  }

  /** Full-jitter delay before retry {@code attempt} (0-based): U[0, base * 2^attempt). */
  public long backoffMs(int attempt) {
    long cap = Math.min(maxDelayMs, baseDelayMs << Math.min(attempt, 30));
    return cap <= 0 ? 0 : ThreadLocalRandom.current().nextLong(cap);
  }

  private static boolean retryable(int status) {
    return status == 429 || status == 502 || status == 503 || status == 504;
  }

  /** The headers of one request: the one place they are built. {@code authorization}: a
   * Privacy Pass {@code PrivateToken} header (the device key then goes in X-LDP-Key), or
   * null. */
  public Map<String, String> headers(String contentType, String idempotencyKey,
                                     String authorization) {
    Map<String, String> h = new LinkedHashMap<>();
    h.put("Content-Type", contentType);
    h.put("Accept", "application/json");
    h.put("Idempotency-Key", idempotencyKey);
    if (authorization != null) {
      h.put("Authorization", authorization);
      if (apiKey != null) {
        h.put("X-LDP-Key", apiKey);
      }
    } else if (apiKey != null) {
      h.put("Authorization", "Bearer " + apiKey);
    }
    return h;
  }

  private Accepted post(String contentType, byte[] body, String idempotencyKey,
                        String authorization) throws IOException {
    Map<String, String> headers = headers(contentType,
        idempotencyKey != null ? idempotencyKey : UUID.randomUUID().toString(), authorization);
    GatewayException last = null;
    for (int attempt = 0; attempt <= maxRetries; attempt++) {
      long delay;
      HttpURLConnection conn = null;
      try {
        int status;
        String text;
        String retryAfter;
        try {
          conn = (HttpURLConnection) new URL(url).openConnection();
          conn.setRequestMethod("POST");
          conn.setDoOutput(true);
          conn.setConnectTimeout(timeoutMs);
          conn.setReadTimeout(timeoutMs);
          conn.setFixedLengthStreamingMode(body.length);
          for (Map.Entry<String, String> h : headers.entrySet()) {
            conn.setRequestProperty(h.getKey(), h.getValue());
          }
          OutputStream out = conn.getOutputStream();
          try {
            out.write(body);
          } finally {
            out.close();
          }
          status = conn.getResponseCode();
          InputStream in = status >= 400 ? conn.getErrorStream() : conn.getInputStream();
          text = in == null ? "" : new String(Io.readAll(in), UTF8);
          if (in != null) {
            in.close();
          }
          retryAfter = conn.getHeaderField("Retry-After");
        } catch (IOException e) {
          last = new GatewayException("POST " + url + ": " + e, -1, null, -1, e);
          delay = backoffMs(attempt);
          if (attempt < maxRetries) {
            pause(delay);
          }
          continue;
        }
        Map<?, ?> obj = null;
        try {
          Object parsed = text.isEmpty() ? null : Json.parse(text);
          obj = parsed instanceof Map ? (Map<?, ?>) parsed : null;
        } catch (IllegalArgumentException e) {
          obj = null;
        }
        if (status >= 200 && status < 300) {
          long m = obj != null && obj.get("accepted_messages") instanceof Long
              ? (Long) obj.get("accepted_messages") : 0;
          long r = obj != null && obj.get("accepted_reports") instanceof Long
              ? (Long) obj.get("accepted_reports") : 0;
          return new Accepted(m, r);
        }
        long ra = retryable(status) ? retryAfterMs(retryAfter, System.currentTimeMillis()) : -1;
        String detail = obj != null && obj.get("detail") != null ? ": " + obj.get("detail") : "";
        last = new GatewayException("POST " + url + ": HTTP " + status + detail, status,
            obj != null && obj.get("reason") instanceof String ? (String) obj.get("reason") : null,
            obj != null && obj.get("index") instanceof Long ? (Long) obj.get("index") : -1, null,
            ra);
        // Not retryable, or asked to wait longer than we may: the caller decides (never early).
        if (!retryable(status) || ra > maxWaitMs) {
          throw last;
        }
        delay = ra >= 0 ? ra : backoffMs(attempt);
      } finally {
        if (conn != null) {
          conn.disconnect();
        }
      }
      if (attempt < maxRetries) {
        pause(delay);
      }
    }
    throw last;
  }

  private void pause(long ms) throws GatewayException {
    try {
      sleeper.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new GatewayException("interrupted while backing off", -1, null, -1, e);
    }
  }
}
