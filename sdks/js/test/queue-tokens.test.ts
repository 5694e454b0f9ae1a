/** Queued reports with Privacy Pass tokens: the token of the report's (collection, window) is
 * obtained when it is queued (kept with it) or when it is sent, while the window is open;
 * what can no longer be counted is dropped and counted. A scripted gateway and an issuer that
 * blind-signs with the shared vectors' key stand in for the real ones (the real ones:
 * tests/sdks/test_sdk_tokens.py). */
import assert from "node:assert/strict";
import { createPrivateKey } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { serve } from "./server.js";

import { VECTORS } from "./cases.js";
import { CollectionSpec, Device, GatewayClient, MemoryStore } from "../src/index.js";
import {
  NK, TOKEN_REQUEST_LEN, b64urlDecode, i2osp, keyFromSpki, modPow, os2ip, pssVerify,
} from "../src/privacypass.js";

const V = JSON.parse(readFileSync(join(VECTORS, "privacypass", "tokens.json"), "utf8")).cases[0];
const WS = 600;
const T0 = 1_800_000_000;  // a window start (a multiple of 600)
const SPEC = new CollectionSpec({ id: "qt", oracle: { mechanism: "grr", epsilon: 1.0,
  domain_size: 3 }, domain: { kind: "categories", labels: ["a", "b", "c"] },
window_seconds: WS, memoization: "none", reports_per_window: 3 });
const DEAD = "http://127.0.0.1:9";
const SECRET = new Uint8Array(16).fill(7);

/** An issuer that lists the key of the windows in `windows` and blind-signs any request. */
async function issuer(windows: number[]) {
  const jwk = createPrivateKey(V.sk_pem).export({ format: "jwk" }) as { d: string };
  const d = os2ip(b64urlDecode(jwk.d));
  const n = BigInt(`0x${V.n}`);
  const asked: string[] = [];
  const srv = await serve((req, body, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    if (req.method === "GET") {
      res.writeHead(200, { "content-type": "application/private-token-issuer-directory" });
      res.end(JSON.stringify({ "ldp-issuer-name": "ldpstream", "token-keys": windows.map((w) =>
        ({ "token-type": 2, "token-key": V.token_key, "ldp-collection":
          url.searchParams.get("collection"), "ldp-window": w, "ldp-window-seconds": WS })) }));
      return;
    }
    asked.push(url.searchParams.get("window") ?? "");
    const out: Uint8Array[] = [];
    for (let at = 0; at < body.length; at += TOKEN_REQUEST_LEN) {
      const z = os2ip(new Uint8Array(body.subarray(at + 3, at + TOKEN_REQUEST_LEN)));
      out.push(i2osp(modPow(z, d, n), NK));
    }
    res.writeHead(200, { "content-type": "application/private-token-response" });
    res.end(Buffer.concat(out));
  });
  return { ...srv, asked };
}

/** A gateway answering from `script` (status, reason) in turn, then 202. */
async function gateway(script: Array<[number, string]> = []) {
  const seen: Array<{ auth?: string; body: string }> = [];
  const srv = await serve((req, body, res) => {
    seen.push({ auth: req.headers.authorization, body: body.toString("utf8") });
    const [status, reason] = script.shift() ?? [202, ""];
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(status === 202 ? { accepted_messages: 1, accepted_reports: 1 }
      : { reason, detail: reason }));
  });
  return { ...srv, seen };
}

const client = (url: string, issuerUrl: string): GatewayClient => new GatewayClient({ url,
  issuerUrl, deviceSecret: SECRET, maxRetries: 0, sleep: async () => undefined,
  now: () => T0 * 1000 });

test("a report queued with its token is sent with it, though the issuer is gone by then", async () => {
  const iss = await issuer([T0]);
  const gw = await gateway();
  const store = new MemoryStore();
  const dev = new Device(SPEC, { store, secret: SECRET });
  assert.ok(await dev.enqueue("a", { now: T0 + 5, tokens: client(DEAD, iss.url) }));
  await iss.close();
  const [entry] = (await store.update((d) => d)).outbox;
  assert.equal(entry.window, T0);
  assert.equal(entry.window_seconds, WS);
  const token = b64urlDecode(entry.token!);
  const key = await keyFromSpki(b64urlDecode(V.token_key));
  assert.ok(await pssVerify(key, token.slice(0, 98), token.slice(98)));  // a valid token
  const out = await client(gw.url, DEAD).sendQueued(store, (T0 + 60) * 1000);
  await gw.close();
  assert.deepEqual(out, { sent: 1, refused: 0, pending: 0, dropped: 0, expired: 0,
    notBefore: null });
  assert.deepEqual(gw.seen.map((s) => s.auth), [`PrivateToken token="${entry.token}"`]);
});

test("offline when queued: the token is obtained when sent, in its window; after it, dropped", async () => {
  const store = new MemoryStore();
  const dev = new Device(SPEC, { store, secret: SECRET });
  const offline = client(DEAD, DEAD);
  assert.ok(await dev.enqueue("a", { now: T0 - 10, tokens: offline }));  // the last window
  assert.ok(await dev.enqueue("b", { now: T0 + 10, tokens: offline }));
  assert.ok(await dev.enqueue("c", { now: T0 + 20, tokens: offline, format: "json" }));
  assert.ok((await store.update((d) => d.outbox)).every((e) => e.token === undefined));
  // still offline: the report of the window that is over cannot be counted any more (dropped
  // without a request), the others are kept
  const down = await offline.sendQueued(store, (T0 + 30) * 1000);
  assert.deepEqual([down.sent, down.pending, down.expired], [0, 2, 1]);
  const iss = await issuer([T0, T0 + WS]);
  const gw = await gateway();
  const out = await client(gw.url, iss.url).sendQueued(store, (T0 + 30) * 1000);
  await Promise.all([iss.close(), gw.close()]);
  assert.deepEqual(out, { sent: 2, refused: 0, pending: 0, dropped: 0, expired: 1,
    notBefore: null });
  assert.deepEqual(iss.asked, [String(T0), String(T0)]);
  assert.equal(gw.seen.length, 2);
  assert.match(gw.seen[0].auth ?? "", /^PrivateToken token="[A-Za-z0-9_-]+"$/);
  const json = JSON.parse(gw.seen[1].body) as { tokens: string[]; reports: unknown[] };
  assert.equal(json.tokens.length, 1);
  assert.equal(json.reports.length, 1);
  assert.equal(gw.seen[1].auth, undefined);
  assert.equal((await store.update((d) => d)).expired, 1);
});

test("the gateway's verdicts: key expired is dropped, a replay of its own token was delivered", async () => {
  const iss = await issuer([T0]);
  const store = new MemoryStore();
  const dev = new Device(SPEC, { store, secret: SECRET });
  const online = client(DEAD, iss.url);
  for (const v of ["a", "b", "c"]) assert.ok(await dev.enqueue(v, { now: T0, tokens: online }));
  await iss.close();
  const gw = await gateway([[403, "token_key_expired"], [409, "token_replayed"],
    [403, "token_window"]]);
  const c = client(gw.url, DEAD);
  const first = await c.sendQueued(store, T0 * 1000);
  // token_window: the gateway's clock is not in the window yet: kept for the next call
  assert.deepEqual([first.sent, first.refused, first.expired, first.pending], [1, 0, 1, 1]);
  const again = await c.sendQueued(store, T0 * 1000 + 1000);
  await gw.close();
  assert.deepEqual([again.sent, again.pending], [1, 0]);
  assert.equal(gw.seen.length, 4);
  assert.equal(gw.seen[2].auth, gw.seen[3].auth);  // the same report, the same token
});
