/** The fleet's privacy budget on the device: the shared vectors (a sequence of reports with a
 * budget → what each costs, which are made, what the store's ledger holds), and the ledger
 * in the store (shared by Devices, kept across restarts, never naming a value). */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { VECTORS } from "./cases.js";
import { CollectionSpec, Device, Memoization, MemoryStore, StoreError } from "../src/index.js";
import { Input } from "../src/spec.js";

interface Step { collection: number; value: Input; now: number; cost: number; made: boolean;
  spent: number }
interface BudgetCase { name: string; budget: number; secret: string;
  collections: Record<string, unknown>[]; steps: Step[];
  ledger: { budget: number; days: Record<string, Record<string, number>> };
  reports: Record<string, Record<string, number>> }

const cases = (JSON.parse(readFileSync(join(VECTORS, "budget", "ledger.json"), "utf8")) as
  { cases: BudgetCase[] }).cases;
const fromHex = (h: string): Uint8Array => Uint8Array.from(h.match(/../g)!, (x) => parseInt(x, 16));
const close = (a: number, b: number): boolean => Math.abs(a - b) <= 1e-12 * Math.max(1, Math.abs(b));

test("budget vectors: the Python SDK's charges, refusals and ledger", async () => {
  assert.ok(cases.length >= 10);
  for (const c of cases) {
    const store = new MemoryStore();
    const specs = c.collections.map((j) => CollectionSpec.fromJson(j));
    const devs = specs.map((s) => new Device(s, { store, secret: fromHex(c.secret),
      budget: c.budget }));
    for (const [i, s] of c.steps.entries()) {
      const dev = devs[s.collection];
      const cost = await dev.cost(s.value);
      assert.ok(close(cost, s.cost), `${c.name} step ${i}: cost ${cost} != ${s.cost}`);
      const made = (await dev.message(s.value, s.now)) !== null;
      assert.equal(made, s.made, `${c.name} step ${i}`);
      const spent = (await dev.ledger(s.now))!.spent;
      assert.ok(close(spent, s.spent), `${c.name} step ${i}: spent ${spent} != ${s.spent}`);
    }
    const doc = await store.update((d) => d);
    const ledger = doc.ledger as BudgetCase["ledger"];
    assert.equal(ledger.budget, c.ledger.budget);
    assert.deepEqual(Object.keys(ledger.days), Object.keys(c.ledger.days), c.name);
    for (const [d, cols] of Object.entries(c.ledger.days)) {
      assert.deepEqual(Object.keys(ledger.days[d]).sort(), Object.keys(cols).sort());
      for (const [k, v] of Object.entries(cols)) assert.ok(close(ledger.days[d][k], v), c.name);
    }
    for (const [fp, counts] of Object.entries(c.reports)) {
      assert.deepEqual(doc.collections[fp].reports ?? {}, counts, c.name);
    }
  }
});

const DAY = 20_000 * 86_400;
const spec = (id: string, memo: Memoization = "none", eps = 1.0): CollectionSpec => new CollectionSpec({ id,
  oracle: { mechanism: "grr", epsilon: eps, domain_size: 4 },
  domain: { kind: "categories", labels: ["a", "b", "c", "d"] }, memoization: memo });

test("Devices of a store share its ledger; a Device without a budget obeys the stored one", async () => {
  const store = new MemoryStore();
  const a = new Device(spec("col-a"), { store, budget: 3 });
  const b = new Device(spec("col-b", "none", 1.5), { store, budget: 3 });
  assert.notEqual(await a.message("a", DAY), null);
  assert.notEqual(await b.message("a", DAY), null);
  assert.equal(await a.message("a", DAY + 3600), null);  // 3.5 > 3: b's spend is seen
  const restarted = new Device(spec("col-a"), { store });  // no budget option: the store's
  assert.deepEqual(await restarted.ledger(DAY), { budget: 3, spent: 2.5,
    days: { [String(DAY / 86_400)]: { "col-a": 1, "col-b": 1.5 } } });
  assert.equal(await restarted.message("a", DAY + 7200), null);
  assert.notEqual(await restarted.message("a", DAY + 86_400), null);
  // without any budget nothing is charged nor refused
  const free = new Device(spec("z"), { store: new MemoryStore() });
  assert.equal(await free.ledger(DAY), null);
  for (let h = 0; h < 30; h++) assert.notEqual(await free.message("a", DAY + h * 3600), null);
  assert.throws(() => new Device(spec("q"), { store, budget: 0 }), RangeError);
});

test("the ledger names no value and racing Devices cannot overspend", async () => {
  const store = new MemoryStore();
  assert.notEqual(await new Device(spec("race", "permanent"), { store, budget: 2.5 })
    .message("c", DAY), null);
  // 8 Devices of other collections at once: only one more fits (2.0 <= 2.5)
  const made = await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map((i) =>
    new Device(spec(`r${i}`, "permanent"), { store, budget: 2.5 })
      .message("abcd"[i % 4], DAY)));
  assert.equal(made.filter((m) => m !== null).length, 1);
  const doc = await store.update((d) => d);
  const counts = doc.collections[spec("race", "permanent").fingerprint].reports!;
  assert.deepEqual(Object.values(counts), [1]);
  assert.ok(Object.keys(counts).every((k) => /^[0-9a-f]{32}$/.test(k)));
});

test("a bad ledger in the store is a clear StoreError", async () => {
  const store = new MemoryStore();
  await store.update((d) => { d.ledger = { days: { x: 1 } }; });
  await assert.rejects(new Device(spec("q"), { store }).message("a", DAY),
    (e: unknown) => e instanceof StoreError && /bad ledger/.test((e as Error).message));
});
