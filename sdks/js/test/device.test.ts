/** Device: permanent answers from the secret, cadence and queue in the store, refused specs. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { loadLimits } from "./cases.js";
import {
  CollectionSpec, Device, KeyValueStorage, KeyValueStore, MemoryStore, SpecError,
} from "../src/index.js";
import { LIMITS } from "../src/limits.js";
import { CryptoSource, WordStream, below, uniform } from "../src/random.js";

function spec(extra: Record<string, unknown> = {}): CollectionSpec {
  return new CollectionSpec({ id: "os", oracle: { mechanism: "grr", epsilon: 1.0, domain_size: 3 },
    domain: { kind: "categories", labels: ["linux", "mac", "win"] }, ...extra });
}

class MemoryStorage implements KeyValueStorage {
  data = new Map<string, string>();
  getItem(k: string): string | null { return this.data.get(k) ?? null; }
  setItem(k: string, v: string): void { this.data.set(k, v); }
}

test("permanent memoization resends the same answer for a value", async () => {
  const dev = new Device(spec(), { store: new MemoryStore() });
  const first = await dev.report("mac");
  for (let i = 0; i < 50; i++) assert.deepEqual(await dev.report("mac"), first);
});

test("a new Device on the same store (an app restart) derives the same answers", async () => {
  const store = new KeyValueStore(new MemoryStorage());
  const s = new CollectionSpec({ id: "u", oracle: { mechanism: "oue", epsilon: 1.0,
    domain_size: 8 }, domain: { kind: "integers", low: 0, high: 7 } });
  const first = await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map((v) =>
    new Device(s, { store }).report(v)));
  for (let reload = 0; reload < 10; reload++) {
    const dev = new Device(s, { store });
    for (let v = 0; v < 8; v++) assert.deepEqual(await dev.report(v), first[v]);
  }
  // a new store is a new device: its answers differ (P(all 8 equal) < 1e-10 for OUE at d = 8)
  const other = new Device(s, { store: new MemoryStore() });
  const again = await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map((v) => other.report(v)));
  assert.notDeepEqual(again, first);
});

test("memoization none draws a fresh answer per report", async () => {
  const dev = new Device(spec({ memoization: "none" }), { store: new MemoryStore() });
  const seen = new Set<number>();
  for (let i = 0; i < 200; i++) seen.add((await dev.report("mac")).y as number);
  assert.equal(seen.size, 3); // P(a value never drawn in 200) < 1e-20
});

test("two-level keeps the permanent answer and re-randomizes every report", async () => {
  const s = new CollectionSpec({ id: "tl", oracle: { mechanism: "oue", epsilon: 4.0,
    domain_size: 16 }, domain: { kind: "integers", low: 0, high: 15 },
  memoization: "two-level", epsilon_1: 1.0 });
  const dev = new Device(s, { store: new MemoryStore() });
  const reports = new Set<string>();
  for (let i = 0; i < 20; i++) reports.add(JSON.stringify(await dev.report(3)));
  assert.ok(reports.size > 1);
  assert.deepEqual(await dev.permanent(3), await new Device(s, {
    store: new MemoryStore(), secret: await dev.secret() }).permanent(3));
});

test("the cadence allows reports_per_window messages per window", async () => {
  const dev = new Device(spec({ reports_per_window: 2, window_seconds: 60 }),
    { store: new MemoryStore() });
  assert.ok(await dev.message("mac", 120.0));
  assert.ok(await dev.message("mac", 121.0));
  assert.equal(await dev.message("mac", 179.9), null);
  assert.equal(await dev.canReport(179.9), false);
  assert.ok(await dev.messageJson("mac", 180.0));
});

test("Devices on one store share the cadence; the store holds no value or answer", async () => {
  const storage = new MemoryStorage();
  const store = new KeyValueStore(storage);
  const a = new Device(spec(), { store, clock: () => 7200.5 });
  const b = new Device(spec(), { store, clock: () => 7300 });
  const made = await Promise.all([a.message("linux"), b.message("linux"), a.message("mac")]);
  assert.equal(made.filter((m) => m !== null).length, 1);
  assert.deepEqual(await b.report("linux"), await a.report("linux"));
  const text = storage.getItem("ldpstream-device-store") as string;
  const doc = JSON.parse(text);
  assert.equal(doc.format, "ldpstream-device-store");
  assert.match(doc.secret, /^[0-9a-f]{64}$/);
  assert.deepEqual(doc.collections, { [spec().fingerprint]: { collection: "os", window: 7200,
    sent: 1 } });
  assert.ok(!text.includes("linux") && !text.includes("answers"));
});

test("the storage option (SDK 0.1's) keeps the store in a localStorage-like storage", async () => {
  const storage = new MemoryStorage();
  const a = await new Device(spec(), { storage }).permanent("mac");
  assert.deepEqual(await new Device(spec(), { storage }).permanent("mac"), a);
  assert.match(storage.getItem("ldpstream-device-store") ?? "", /"secret":"[0-9a-f]{64}"/);
});

test("enqueue spends the cadence and queues the message, bounded, oldest dropped", async () => {
  const store = new MemoryStore(3);
  const dev = new Device(spec({ window_seconds: 60 }), { store });
  for (let w = 0; w < 5; w++) assert.equal(await dev.enqueue("mac", { now: 60 * w }), true);
  assert.equal(await dev.enqueue("mac", { now: 4 * 60 + 1 }), false);
  const doc = await store.update((d) => d);
  assert.deepEqual(doc.outbox.map((e) => e.window), [120, 180, 240]);
  assert.equal(doc.dropped, 2);
  assert.equal(new Set(doc.outbox.map((e) => e.key)).size, 3);
  assert.equal(doc.outbox[0].type, "application/octet-stream");
});

test("unsafe specs are refused with a SpecError naming the parameter", () => {
  const grr = (epsilon: number): unknown => new CollectionSpec({ id: "x", oracle: {
    mechanism: "grr", epsilon, domain_size: 3 },
  domain: { kind: "categories", labels: ["a", "b", "c"] } });
  assert.throws(() => grr(Number.NaN), (e: unknown) => e instanceof SpecError &&
    e.parameter === "oracle.epsilon");
  for (const eps of [40, 1000, 29.81, 0.0005]) {
    assert.throws(() => grr(eps), (e: unknown) => e instanceof SpecError &&
      e.parameter === "oracle.epsilon" && /\[0\.001, 29\.8\] for grr/.test(e.message), `${eps}`);
  }
  assert.ok(grr(29.8));
  const oue = { id: "o", oracle: { mechanism: "oue", epsilon: 9.8, domain_size: 4 },
    domain: { kind: "integers", low: 0, high: 3 } };
  assert.throws(() => new CollectionSpec(oue as never), /9\.7/);
  const tl = { ...oue, oracle: { ...oue.oracle, epsilon: 1 }, memoization: "two-level",
    epsilon_1: 0 };
  assert.throws(() => new CollectionSpec(tl as never), (e: unknown) => e instanceof SpecError &&
    e.parameter === "epsilon_1");
  // the ranges the SDK carries are ldpcore's (sdks/vectors/limits, generated from ldpcore)
  assert.deepEqual(JSON.parse(JSON.stringify(LIMITS)), loadLimits());
});

test("only the CSPRNG draws unless a test source is injected under its test-only name",
  async () => {
    const fixed = (): Device => new Device(spec({ memoization: "none" }), {
      store: new MemoryStore(), testOnlyDraws: new WordStream(new Array(64).fill(0)) });
    // uniform() = 0 < p: the true value is kept, on every call
    assert.deepEqual(await fixed().report("win"), { y: 2 });
    const real = new Device(spec({ memoization: "none" }), { store: new MemoryStore() });
    const ys = new Set<number>();
    for (let i = 0; i < 100; i++) ys.add((await real.report("win")).y as number);
    assert.equal(ys.size, 3);
  });

test("CryptoSource words are uniform (byte frequencies within 6 sigma)", () => {
  const src = new CryptoSource();
  const counts = new Array(16).fill(0);
  const n = 160000;
  for (let i = 0; i < n; i++) counts[src.nextU32() >>> 28]++;
  const sd = Math.sqrt(n / 16 * (15 / 16));
  for (const c of counts) assert.ok(Math.abs(c - n / 16) < 6 * sd, `${counts}`);
  let s = 0;
  for (let i = 0; i < 10000; i++) s += uniform(src);
  assert.ok(Math.abs(s / 10000 - 0.5) < 6 * Math.sqrt(1 / 12 / 10000));
  for (let i = 0; i < 1000; i++) assert.ok(below(src, 7) < 7);
});

test("a set-valued device derives one answer per set, in any order", async () => {
  const s = new CollectionSpec({ id: "apps", oracle: { mechanism: "ps", epsilon: 1.0,
    domain_size: 4, length: 2, inner: "grr" },
  domain: { kind: "categories", labels: ["a", "b", "c", "d"] } });
  const store = new MemoryStore();
  const dev = new Device(s, { store });
  const first = await dev.report(["b", "a"]);
  assert.deepEqual(await dev.report(["a", "b", "a"]), first);
  assert.deepEqual(await new Device(s, { store }).report(["a", "b"]), first);
  await assert.rejects(dev.report(["a", "z"]), /labels/);
});

test("a multi device takes a mapping or a list per attribute", async () => {
  const s = new CollectionSpec({ id: "profile", oracle: { mechanism: "multi", epsilon: 2.0,
    sample: 1, domain_size: 30, attributes: [
      { name: "os", mechanism: "grr", domain_size: 3 },
      { name: "age", mechanism: "pm", domain_size: 10, low: 0.0, high: 100.0 }] },
  domain: { kind: "attributes", attributes: [
    { name: "os", kind: "categories", labels: ["linux", "mac", "win"] },
    { name: "age", kind: "interval", low: 0, high: 100, bins: 10 }] } });
  const dev = new Device(s, { store: new MemoryStore() });
  const first = await dev.report({ os: "mac", age: 37 });
  assert.deepEqual(await dev.report(["mac", 39.5]), first);
  assert.equal((first.attrs as number[]).length, 1);
  await assert.rejects(dev.report({ os: "mac" }), /attributes/);
});
