package org.ldpstream.sdk;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Gateway client: {@code POST /v1/reports} over {@link HttpURLConnection} (Android and JVM),
 * with retries and exponential backoff.
 *
 * <p>Retried: network errors, 429, 502, 503 and 504, honouring {@code Retry-After} (seconds or
 * an HTTP date); never retried: any other status (a 4xx means the message itself is wrong).
 * Blocking: call it off the UI thread.
 */
public final class GatewayClient {
  /** Sleeps between attempts (injectable for tests). */
  public interface Sleeper {
    void sleep(long millis) throws InterruptedException;
  }

  private final String url;
  private final String apiKey;
  private int maxRetries = 5;
  private long baseDelayMs = 200;
  private long maxDelayMs = 30000;
  private int timeoutMs = 10000;
  private Sleeper sleeper = Thread::sleep;
  private PrivacyPass.Wallet wallet;

  public GatewayClient(String baseUrl, String apiKey) {
    this.url = baseUrl.replaceAll("/+$", "") + "/v1/reports";
    this.apiKey = apiKey;
  }

  public GatewayClient maxRetries(int n) {
    maxRetries = n;
    return this;
  }

  public GatewayClient backoff(long baseMs, long maxMs) {
    baseDelayMs = baseMs;
    maxDelayMs = maxMs;
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

  /**
   * Privacy Pass (docs/privacy-pass.md): every report then carries a token of its (collection,
   * window), obtained from the issuer at {@code issuerUrl}, cached and redeemed here.
   * {@code deviceSecret}: the device's persistent secret (the issuer sees only an HMAC of it
   * and counts the quota against it).  The fleet key for the issuer is this client's key.
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
    return post("application/octet-stream", message, null);
  }

  /** Send several binary messages as one {@code application/x-ldp-frames} body (with tokens:
   * {@code application/x-ldp-token-frames}). */
  public Accepted send(List<byte[]> messages) throws IOException {
    if (wallet != null) {
      return sendTokened(messages, 0);
    }
    return post("application/x-ldp-frames", Encoding.frames(messages), null);
  }

  /** Send JSON message texts (one, or several as a JSON array); with tokens, each message
   * gets its {@code tokens}. */
  @SuppressWarnings("unchecked")
  public Accepted sendJson(List<String> messages) throws IOException {
    if (wallet != null) {
      long nowS = System.currentTimeMillis() / 1000;
      List<String> out = new java.util.ArrayList<>();
      for (String m : messages) {
        Map<String, Object> obj = new java.util.LinkedHashMap<>((Map<String, Object>) Json.parse(m));
        int n = ((List<?>) obj.get("reports")).size();
        List<String> toks = new java.util.ArrayList<>();
        for (byte[] t : wallet.take((String) obj.get("collection"), n, nowS, null)) {
          toks.add(PrivacyPass.b64url(t));
        }
        obj.put("tokens", toks);
        out.add(Json.write(obj));
      }
      messages = out;
    }
    String body = messages.size() == 1 ? messages.get(0) : "[" + String.join(",", messages) + "]";
    return post("application/json", body.getBytes(StandardCharsets.UTF_8), null);
  }

  private Accepted sendTokened(List<byte[]> messages, int shift) throws IOException {
    long nowS = System.currentTimeMillis() / 1000;
    List<List<byte[]>> tokens = new java.util.ArrayList<>();
    for (byte[] m : messages) {
      Object[] head = PrivacyPass.messageHead(m);
      String cid = (String) head[0];
      long[] w = wallet.window(cid, nowS, null);
      Long want = shift == 0 ? null : w[0] + shift * w[1];
      tokens.add(wallet.take(cid, (int) (long) (Long) head[1], nowS, want));
    }
    try {
      if (messages.size() == 1 && tokens.get(0).size() == 1) {
        return post("application/octet-stream", messages.get(0),
            PrivacyPass.authorizationHeader(tokens.get(0).get(0)));
      }
      return post("application/x-ldp-token-frames", PrivacyPass.tokenFrames(tokens, messages),
          null);
    } catch (GatewayException e) {
      // the gateway's clock puts the reports in the neighbouring window: once, with its tokens
      if (shift == 0 && ("token_window".equals(e.reason)
          || "token_key_expired".equals(e.reason))) {
        return sendTokened(messages, "token_key_expired".equals(e.reason) ? 1 : -1);
      }
      throw e;
    }
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
    try {
      long t = ZonedDateTime.parse(s, DateTimeFormatter.RFC_1123_DATE_TIME).toInstant()
          .toEpochMilli();
      return Math.max(0, t - nowMs);
    } catch (RuntimeException e) {
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

  private Accepted post(String contentType, byte[] body, String authorization)
      throws IOException {
    GatewayException last = null;
    for (int attempt = 0; attempt <= maxRetries; attempt++) {
      long delay;
      HttpURLConnection conn = null;
      try {
        conn = (HttpURLConnection) new URL(url).openConnection();
        conn.setRequestMethod("POST");
        conn.setDoOutput(true);
        conn.setConnectTimeout(timeoutMs);
        conn.setReadTimeout(timeoutMs);
        conn.setFixedLengthStreamingMode(body.length);
        conn.setRequestProperty("Content-Type", contentType);
        conn.setRequestProperty("Accept", "application/json");
        if (authorization != null) {
          conn.setRequestProperty("Authorization", authorization);
          if (apiKey != null) {
            conn.setRequestProperty("X-LDP-Key", apiKey);
          }
        } else if (apiKey != null) {
          conn.setRequestProperty("Authorization", "Bearer " + apiKey);
        }
        try (OutputStream out = conn.getOutputStream()) {
          out.write(body);
        }
        int status = conn.getResponseCode();
        InputStream in = status >= 400 ? conn.getErrorStream() : conn.getInputStream();
        String text = in == null ? "" : new String(Io.readAll(in), StandardCharsets.UTF_8);
        if (in != null) {
          in.close();
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
        String detail = obj != null && obj.get("detail") != null ? ": " + obj.get("detail") : "";
        last = new GatewayException("POST " + url + ": HTTP " + status + detail, status,
            obj != null && obj.get("reason") instanceof String ? (String) obj.get("reason") : null,
            obj != null && obj.get("index") instanceof Long ? (Long) obj.get("index") : -1, null);
        if (!retryable(status)) {
          throw last;
        }
        long ra = retryAfterMs(conn.getHeaderField("Retry-After"), System.currentTimeMillis());
        delay = ra >= 0 ? Math.min(ra, maxDelayMs) : backoffMs(attempt);
      } catch (GatewayException e) {
        throw e;
      } catch (IOException e) {
        last = new GatewayException("POST " + url + ": " + e, -1, null, -1, e);
        delay = backoffMs(attempt);
      } finally {
        if (conn != null) {
          conn.disconnect();
        }
      }
      if (attempt < maxRetries) {
        try {
          sleeper.sleep(delay);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new GatewayException("interrupted while backing off", -1, null, -1, e);
        }
      }
    }
    throw last;
  }
}
