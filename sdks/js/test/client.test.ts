/** Gateway client: retries (429/503/network) with backoff and Retry-After, never other 4xx. */
import assert from "node:assert/strict";
import { createServer, IncomingMessage, ServerResponse } from "node:http";
import { AddressInfo } from "node:net";
import { test } from "node:test";

import { GatewayClient, GatewayError, retryAfterMs } from "../src/index.js";

type Handler = (req: IncomingMessage, body: Buffer, res: ServerResponse) => void;

async function serve(handler: Handler): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => handler(req, Buffer.concat(chunks), res));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((r) => server.close(() => r())) };
}

const accepted = (res: ServerResponse, n: number): void => {
  res.writeHead(202, { "content-type": "application/json" });
  res.end(JSON.stringify({ accepted_messages: n, accepted_reports: n }));
};

test("429 and 503 are retried, honouring Retry-After; the body and headers are sent", async () => {
  const seen: Array<{ type?: string; auth?: string; len: number }> = [];
  let calls = 0;
  const srv = await serve((req, body, res) => {
    seen.push({ type: req.headers["content-type"], auth: req.headers.authorization,
      len: body.length });
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
