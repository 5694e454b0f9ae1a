/** Gateway client: retries (429/503/network) with backoff and Retry-After, never other 4xx. */
import assert from "node:assert/strict";
import { ServerResponse } from "node:http";
import { test } from "node:test";

import { serve } from "./server.js";

import { retryAfterMs } from "../src/client.js";
import { CollectionSpec, Device, GatewayClient, GatewayError, MemoryStore } from "../src/index.js";

const accepted = (res: ServerResponse, n: number): void => {
  res.writeHead(202, { "content-type": "application/json" });
  res.end(JSON.stringify({ accepted_messages: n, accepted_reports: n }));
};

test("429 and 503 are retried, honouring Retry-After; the body and headers are sent", async () => {
  const seen: Array<{ type?: string; auth?: string; key?: string; len: number }> = [];
  let calls = 0;
  const srv = await serve((req, body, res) => {
    seen.push({ type: req.headers["content-type"], auth: req.headers.authorization,
      key: req.headers["idempotency-key"] as string, len: body.length });
    calls++;
    if (calls === 1) { res.writeHead(429, { "retry-after": "2" }); res.end("{}"); return; }
    if (calls === 2) { res.writeHead(503); res.end(); return; }
    accepted(res, 2);
  });
  const sleeps: number[] = [];
  const client = new GatewayClient({ url: srv.url, apiKey: "k1", baseDelayMs: 100,
    sleep: async (ms) => { sleeps.push(ms); }, random: () => 0.5 });
  const out = await client.send([new Uint8Array([1, 2, 3]), new Uint8Array([4])]);
  await srv.close();
  assert.deepEqual(out, { accepted_messages: 2, accepted_reports: 2 });
  assert.deepEqual(sleeps, [2000, 100]); // Retry-After, then jittered 100 * 2^1 * 0.5
  assert.equal(seen[0].type, "application/x-ldp-frames");
  assert.equal(seen[0].auth, "Bearer k1");
  assert.equal(seen[0].len, 4 + 3 + 4 + 1);
  // one Idempotency-Key for the request, reused on each of its retries
  assert.match(seen[0].key ?? "", /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.ok(seen.every((s) => s.key === seen[0].key));
});

test("each request has its own key; a Retry-After beyond maxWaitMs is not cut short", async () => {
  const keys: string[] = [];
  let calls = 0;
  const srv = await serve((req, _body, res) => {
    keys.push(req.headers["idempotency-key"] as string);
    calls++;
    if (calls === 2) { res.writeHead(503, { "retry-after": "3600" }); res.end("{}"); return; }
    accepted(res, 1);
  });
  const sleeps: number[] = [];
  const client = new GatewayClient({ url: srv.url, maxWaitMs: 60_000, maxDelayMs: 1000,
    sleep: async (ms) => { sleeps.push(ms); } });
  await client.send(new Uint8Array([1]));
  await assert.rejects(client.send(new Uint8Array([2])), (e: unknown) =>
    e instanceof GatewayError && e.status === 503 && e.retryAfterMs === 3_600_000);
  await srv.close();
  assert.deepEqual(sleeps, []); // neither slept 30 s (the old cap) nor retried early
  assert.equal(calls, 2);
  assert.notEqual(keys[0], keys[1]);
});

test("sendQueued posts queued reports under their own keys until acknowledged", async () => {
  const spec = new CollectionSpec({ id: "q", oracle: { mechanism: "grr", epsilon: 1.0,
    domain_size: 3 }, domain: { kind: "categories", labels: ["a", "b", "c"] },
  window_seconds: 60, memoization: "none" });
  const store = new MemoryStore();
  const dev = new Device(spec, { store });
  assert.ok(await dev.enqueue("a", { now: 0 }));
  assert.ok(await dev.enqueue("b", { now: 60, format: "json" }));
  const queued = (await store.update((d) => d)).outbox;
  const seen: Array<{ key: string; type: string; body: string }> = [];
  let mode = "503";
  const srv = await serve((req, body, res) => {
    seen.push({ key: req.headers["idempotency-key"] as string,
      type: req.headers["content-type"] as string, body: body.toString("hex") });
    if (mode === "503") { res.writeHead(503, { "retry-after": "120" }); res.end("{}"); return; }
    accepted(res, 1);
  });
  const client = new GatewayClient({ url: srv.url, sleep: async () => undefined });
  // offline: nothing is lost
  const down = new GatewayClient({ url: "http://127.0.0.1:9", maxRetries: 1,
    sleep: async () => undefined });
  assert.equal((await down.sendQueued(store)).pending, 2);
  // 503 with Retry-After 120 s (beyond the 60 s maxWaitMs): kept, and not retried before it
  const t0 = 1_000_000;
  const first = await client.sendQueued(store, t0);
  assert.deepEqual([first.sent, first.pending, first.notBefore], [0, 2, t0 + 120_000]);
  assert.equal((await client.sendQueued(store, t0 + 119_000)).sent, 0);
  assert.equal(seen.length, 1);
  mode = "ok";
  const done = await client.sendQueued(store, t0 + 120_000);
  await srv.close();
  assert.deepEqual(done, { sent: 2, refused: 0, pending: 0, dropped: 0, notBefore: null });
  assert.deepEqual(seen.map((s) => s.key), [queued[0].key, queued[0].key, queued[1].key]);
  assert.deepEqual(seen.slice(1).map((s) => [s.type, s.body]),
    queued.map((q) => [q.type, q.body]));
});

test("a 400 is not retried and carries the gateway's reason", async () => {
  let calls = 0;
  const srv = await serve((_req, _body, res) => {
    calls++;
    res.writeHead(400, { "content-type": "application/json" });
    res.end(JSON.stringify({ detail: "bad fingerprint", reason: "fingerprint", index: 0 }));
  });
  const client = new GatewayClient({ url: srv.url, sleep: async () => undefined });
  await assert.rejects(client.send(new Uint8Array([0])), (e: unknown) =>
    e instanceof GatewayError && e.status === 400 && e.body?.reason === "fingerprint");
  await srv.close();
  assert.equal(calls, 1);
});

test("network errors are retried up to maxRetries, then reported", async () => {
  const srv = await serve(() => undefined);
  const url = srv.url;
  await srv.close(); // nothing listens any more: connection refused
  let sleeps = 0;
  const client = new GatewayClient({ url, maxRetries: 3, sleep: async () => { sleeps++; } });
  await assert.rejects(client.sendJson({ collection: "x" }), GatewayError);
  assert.equal(sleeps, 3);
});

test("Retry-After is read in seconds or as an HTTP date", () => {
  assert.equal(retryAfterMs("3"), 3000);
  assert.equal(retryAfterMs(new Date(61_000).toUTCString(), 1_000), 60_000);
  assert.equal(retryAfterMs("soon"), null);
});

test("fetchSpec reads the query API's answer and verifies the fingerprint", async () => {
  const { fetchSpec } = await import("../src/index.js");
  const { loadCases } = await import("./cases.js");
  const served = loadCases()[0].collection as Record<string, unknown>;
  let path = "";
  const srv = await serve((req, _body, res) => {
    path = req.url ?? "";
    const tampered = path.includes("bad");
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ spec: tampered ? { ...served, min_reports: 7 } : served }));
  });
  try {
    const spec = await fetchSpec(`${srv.url}/`, served.id as string);
    assert.equal(path, `/v1/collections/${served.id}`);
    assert.equal(spec.fingerprint, served.fingerprint);
    await assert.rejects(fetchSpec(srv.url, "bad"), /fingerprint/);
  } finally {
    await srv.close();
  }
});
