/** Device: memoization, cadence and persistence as the Python SDK (producer/sdk.py). */
import assert from "node:assert/strict";
import { test } from "node:test";

import { CollectionSpec, CryptoSource, Device, KeyValueStorage, below, uniform } from "../src/index.js";

function spec(extra: Record<string, unknown> = {}): CollectionSpec {
  return new CollectionSpec({ id: "os", oracle: { mechanism: "grr", epsilon: 1.0, domain_size: 3 },
    domain: { kind: "categories", labels: ["linux", "mac", "win"] }, ...extra });
}

class MemoryStorage implements KeyValueStorage {
  data = new Map<string, string>();
  getItem(k: string): string | null { return this.data.get(k) ?? null; }
  setItem(k: string, v: string): void { this.data.set(k, v); }
}

test("permanent memoization resends the same answer for a value", () => {
  const dev = new Device(spec());
  const first = dev.report("mac");
  for (let i = 0; i < 50; i++) assert.deepEqual(dev.report("mac"), first);
});

test("memoization none draws a fresh answer per report", () => {
  const dev = new Device(spec({ memoization: "none" }));
  const seen = new Set<number>();
  for (let i = 0; i < 200; i++) seen.add(dev.report("mac").y as number);
  assert.equal(seen.size, 3); // P(a value never drawn in 200) < 1e-20
});

test("two-level keeps the permanent answer and re-randomizes every report", () => {
  const s = new CollectionSpec({ id: "tl", oracle: { mechanism: "oue", epsilon: 4.0,
    domain_size: 16 }, domain: { kind: "integers", low: 0, high: 15 },
  memoization: "two-level", epsilon_1: 1.0 });
  const dev = new Device(s);
  const reports = new Set<string>();
  for (let i = 0; i < 20; i++) reports.add(JSON.stringify(dev.report(3)));
  assert.ok(reports.size > 1);
});

test("the cadence allows reports_per_window messages per window", () => {
  const dev = new Device(spec({ reports_per_window: 2, window_seconds: 60 }));
  assert.ok(dev.message("mac", 120.0));
  assert.ok(dev.message("mac", 121.0));
  assert.equal(dev.message("mac", 179.9), null);
  assert.equal(dev.canReport(179.9), false);
  assert.ok(dev.messageJson("mac", 180.0));
});

test("a device built on the same storage neither redraws nor reports twice", () => {
  const storage = new MemoryStorage();
  const a = new Device(spec(), { storage, clock: () => 7200.5 });
  const msg = a.message("win");
  assert.ok(msg);
  const b = new Device(spec(), { storage, clock: () => 7300 });
  assert.equal(b.message("win"), null);
  assert.deepEqual(b.report("win"), a.report("win"));
  const doc = JSON.parse(storage.getItem("ldpstream-device-memo") as string);
  assert.equal(doc.format, "ldpstream-device-memo");
  assert.deepEqual(Object.keys(doc.collections), [spec().fingerprint]);
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

test("a set-valued device memoizes per set, keyed -1 - bitmask as the Python SDK", () => {
  const s = new CollectionSpec({ id: "apps", oracle: { mechanism: "ps", epsilon: 1.0,
    domain_size: 4, length: 2, inner: "grr" },
  domain: { kind: "categories", labels: ["a", "b", "c", "d"] } });
  const storage = new MemoryStorage();
  const dev = new Device(s, { storage });
  const first = dev.report(["b", "a"]);
  assert.deepEqual(dev.report(["a", "b", "a"]), first);
  const doc = JSON.parse(storage.getItem("ldpstream-device-memo") as string);
  assert.deepEqual(Object.keys(doc.collections[s.fingerprint].answers), ["-4"]);
  assert.deepEqual(new Device(s, { storage }).report(["a", "b"]), first);
  assert.throws(() => dev.report(["a", "z"]), /labels/);
});

test("a multi device takes a mapping or a list per attribute, keyed by the mixed radix", () => {
  const s = new CollectionSpec({ id: "profile", oracle: { mechanism: "multi", epsilon: 2.0,
    sample: 1, domain_size: 30, attributes: [
      { name: "os", mechanism: "grr", domain_size: 3 },
      { name: "age", mechanism: "pm", domain_size: 10, low: 0.0, high: 100.0 }] },
  domain: { kind: "attributes", attributes: [
    { name: "os", kind: "categories", labels: ["linux", "mac", "win"] },
    { name: "age", kind: "interval", low: 0, high: 100, bins: 10 }] } });
  const storage = new MemoryStorage();
  const dev = new Device(s, { storage });
  const first = dev.report({ os: "mac", age: 37 });
  assert.deepEqual(dev.report(["mac", 39.5]), first);
  const doc = JSON.parse(storage.getItem("ldpstream-device-memo") as string);
  assert.deepEqual(Object.keys(doc.collections[s.fingerprint].answers), ["13"]);
  assert.equal((first.attrs as number[]).length, 1);
  assert.throws(() => dev.report({ os: "mac" }), /attributes/);
});
