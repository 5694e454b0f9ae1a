package org.ldpstream.sdk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Gateway client: retries (429/503/network) with backoff and Retry-After as stated, never other
 * 4xx; an Idempotency-Key per request; the durable queue. */
class GatewayClientTest {
  interface Handler {
    void handle(HttpExchange ex, byte[] body, int call) throws IOException;
  }

  static HttpServer serve(Handler h) throws IOException {
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    AtomicInteger calls = new AtomicInteger();
    server.createContext("/v1/reports", ex -> {
      byte[] body = Io.readAll(ex.getRequestBody());
      h.handle(ex, body, calls.incrementAndGet());
      ex.close();
    });
    server.start();
    return server;
  }

  static void reply(HttpExchange ex, int status, String body) throws IOException {
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    ex.getResponseHeaders().add("Content-Type", "application/json");
    ex.sendResponseHeaders(status, b.length == 0 ? -1 : b.length);
    if (b.length > 0) {
      try (OutputStream out = ex.getResponseBody()) {
        out.write(b);
      }
    }
  }

  static String url(HttpServer s) {
    return "http://127.0.0.1:" + s.getAddress().getPort();
  }

  @Test
  void retries429And503HonouringRetryAfterAndSendsFrames() throws IOException {
    List<String> seen = new ArrayList<>();
    List<String> keys = new ArrayList<>();
    HttpServer srv = serve((ex, body, call) -> {
      keys.add(ex.getRequestHeaders().getFirst("Idempotency-Key"));
      seen.add(ex.getRequestHeaders().getFirst("Content-Type") + " "
          + ex.getRequestHeaders().getFirst("Authorization") + " " + body.length);
      if (call == 1) {
        ex.getResponseHeaders().add("Retry-After", "2");
        reply(ex, 429, "{}");
      } else if (call == 2) {
        reply(ex, 503, "");
      } else {
        reply(ex, 202, "{\"accepted_messages\":2,\"accepted_reports\":2}");
      }
    });
    List<Long> sleeps = new ArrayList<>();
    try {
      GatewayClient client = new GatewayClient(url(srv), "k1").backoff(100, 30000)
          .sleeper(sleeps::add);
      GatewayClient.Accepted out = client.send(Arrays.asList(new byte[3], new byte[1]));
      assertEquals(2, out.messages);
      assertEquals(2, out.reports);
    } finally {
      srv.stop(0);
    }
    assertEquals(3, seen.size());
    assertEquals("application/x-ldp-frames Bearer k1 12", seen.get(0));
    assertEquals(2000L, sleeps.get(0));
    assertEquals(2, sleeps.size());
    assertEquals(true, sleeps.get(1) < 200L);
    // one Idempotency-Key (a random UUID) for the request, reused on each of its retries
    assertTrue(keys.get(0).matches("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
        + "[0-9a-f]{12}"), keys.get(0));
    assertEquals(Arrays.asList(keys.get(0), keys.get(0), keys.get(0)), keys);
  }

  @Test
  void eachRequestHasItsOwnKeyAndALongRetryAfterIsNotCutShort() throws IOException {
    List<String> keys = new ArrayList<>();
    HttpServer srv = serve((ex, body, call) -> {
      keys.add(ex.getRequestHeaders().getFirst("Idempotency-Key"));
      if (call == 2) {
        ex.getResponseHeaders().add("Retry-After", "3600");
        reply(ex, 503, "{}");
      } else {
        reply(ex, 202, "{\"accepted_messages\":1,\"accepted_reports\":1}");
      }
    });
    List<Long> sleeps = new ArrayList<>();
    try {
      GatewayClient client = new GatewayClient(url(srv), null).backoff(100, 1000)
          .maxWaitMs(60000).sleeper(sleeps::add);
      client.send(new byte[1]);
      GatewayException e = assertThrows(GatewayException.class, () -> client.send(new byte[2]));
      assertEquals(503, e.status);
      assertEquals(3_600_000L, e.retryAfterMs);
    } finally {
      srv.stop(0);
    }
    assertEquals(new ArrayList<Long>(), sleeps); // no early retry, no 30 s cap
    assertEquals(2, keys.size());
    assertNotEquals(keys.get(0), keys.get(1));
  }

  @Test
  void queuedReportsSurviveRestartsAndKeepTheirKeys(@TempDir Path dir) throws IOException {
    CollectionSpec spec = Specs.collection("q", Specs.oracle("grr", 1.0, 3, ""),
        Specs.categories("a", "b", "c"), ",\"window_seconds\":60,\"memoization\":\"none\"");
    File f = dir.resolve("store.json").toFile();
    final double[] now = {0};
    Device dev = Device.builder(spec).store(new FileStore(f)).clock(() -> now[0]).build();
    assertTrue(dev.enqueue("a"));
    now[0] = 60;
    assertTrue(dev.enqueue("b", true));
    List<Map<String, Object>> queued = new FileStore(f).outbox();
    // offline: nothing is lost
    GatewayClient down = new GatewayClient("http://127.0.0.1:9", null).maxRetries(1)
        .sleeper(ms -> { });
    assertEquals(2, down.sendQueued(new FileStore(f)).pending);
    List<String> keys = new ArrayList<>();
    List<String> bodies = new ArrayList<>();
    final boolean[] ok = {false};
    HttpServer srv = serve((ex, body, call) -> {
      keys.add(ex.getRequestHeaders().getFirst("Idempotency-Key"));
      bodies.add(ex.getRequestHeaders().getFirst("Content-Type") + " " + Hex.encode(body));
      if (!ok[0]) {
        ex.getResponseHeaders().add("Retry-After", "120");
        reply(ex, 503, "{}");
      } else {
        reply(ex, 202, "{\"accepted_messages\":1,\"accepted_reports\":1}");
      }
    });
    try {
      GatewayClient client = new GatewayClient(url(srv), null).sleeper(ms -> { });
      long t0 = 1_000_000L;
      GatewayClient.QueueResult r = client.sendQueued(new FileStore(f), t0);
      assertEquals(0, r.sent);
      assertEquals(2, r.pending);
      assertEquals(t0 + 120_000, r.notBeforeMs);
      assertEquals(0, client.sendQueued(new FileStore(f), t0 + 119_000).sent);
      assertEquals(1, keys.size()); // no request before Retry-After passed
      ok[0] = true;
      GatewayClient.QueueResult done = client.sendQueued(new FileStore(f), t0 + 120_000);
      assertEquals(2, done.sent);
      assertEquals(0, done.pending);
      assertEquals(-1, done.notBeforeMs);
    } finally {
      srv.stop(0);
    }
    assertEquals(Arrays.asList(queued.get(0).get("key"), queued.get(0).get("key"),
        queued.get(1).get("key")), keys);
    assertEquals(Arrays.asList(queued.get(0).get("type") + " " + queued.get(0).get("body"),
        queued.get(1).get("type") + " " + queued.get(1).get("body")), bodies.subList(1, 3));
  }

  @Test
  void a400IsNotRetriedAndCarriesTheReason() throws IOException {
    AtomicInteger calls = new AtomicInteger();
    HttpServer srv = serve((ex, body, call) -> {
      calls.incrementAndGet();
      reply(ex, 400, "{\"detail\":\"bad fingerprint\",\"reason\":\"fingerprint\",\"index\":0}");
    });
    try {
      GatewayClient client = new GatewayClient(url(srv), null).sleeper(ms -> { });
      GatewayException e = assertThrows(GatewayException.class, () -> client.send(new byte[1]));
      assertEquals(400, e.status);
      assertEquals("fingerprint", e.reason);
      assertEquals(0, e.index);
    } finally {
      srv.stop(0);
    }
    assertEquals(1, calls.get());
  }

  @Test
  void networkErrorsAreRetriedThenReported() throws IOException {
    HttpServer srv = serve((ex, body, call) -> reply(ex, 202, "{}"));
    String u = url(srv);
    srv.stop(0); // nothing listens any more
    List<Long> sleeps = new ArrayList<>();
    GatewayClient client = new GatewayClient(u, null).maxRetries(3).sleeper(sleeps::add);
    GatewayException e = assertThrows(GatewayException.class,
        () -> client.sendJson(Arrays.asList("{}")));
    assertEquals(-1, e.status);
    assertEquals(3, sleeps.size());
  }

  @Test
  void retryAfterIsReadInSecondsOrAsAnHttpDate() {
    assertEquals(3000, GatewayClient.retryAfterMs("3", 0));
    assertEquals(60000, GatewayClient.retryAfterMs("Thu, 01 Jan 1970 00:01:01 GMT", 1000));
    assertEquals(-1, GatewayClient.retryAfterMs("soon", 0));
  }

  @Test
  @SuppressWarnings("unchecked")
  void fetchReadsTheQueryApiAnswerAndVerifiesTheFingerprint() throws IOException {
    java.util.Map<String, Object> served = (java.util.Map<String, Object>)
        VectorsTest.cases().get(0).get("collection");
    List<String> paths = new ArrayList<>();
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext("/v1/collections/", ex -> {
      paths.add(ex.getRequestURI().getPath());
      java.util.Map<String, Object> spec = new java.util.LinkedHashMap<>(served);
      if (ex.getRequestURI().getPath().endsWith("bad")) {
        spec.put("min_reports", 7L);
      }
      java.util.Map<String, Object> body = new java.util.LinkedHashMap<>();
      body.put("spec", spec);
      reply(ex, 200, Json.write(body));
      ex.close();
    });
    server.start();
    try {
      CollectionSpec spec = CollectionSpec.fetch(url(server) + "/", (String) served.get("id"));
      assertEquals(served.get("fingerprint"), spec.fingerprint);
      assertEquals("/v1/collections/" + served.get("id"), paths.get(0));
      assertThrows(SpecException.class, () -> CollectionSpec.fetch(url(server), "bad"));
    } finally {
      server.stop(0);
    }
  }
}
