/** The shared test vectors (sdks/vectors, generated from ldpcore) pass byte for byte. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { canonicalJson, fingerprintOf, pyFloat } from "../src/canonical.js";
import { encodeBinary, encodeJson, toRecords } from "../src/encode.js";
import { CollectionSpec, Device, Input, MemoryStore, Report } from "../src/index.js";
import { Value, makeRerandomizer } from "../src/mechanisms.js";
import { PermanentWords, WordStream } from "../src/random.js";
import { loadCases, loadPermanentCases } from "./cases.js";

const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");

for (const c of loadCases()) {
  test(`vector ${c.name}`, async () => {
    const spec = CollectionSpec.fromJson(c.collection);
    assert.equal(canonicalJson(spec.canonical()), c.canonical);
    assert.equal(spec.fingerprint, c.fingerprint);
    assert.equal(spec.oracleFingerprint, c.oracle_fingerprint);
    const values: Value[] = c.inputs.map((x: Input) => (spec.setValued
      ? spec.indexSet(x as Array<string | number>)
      : spec.domain.kind === "attributes" ? spec.attributeIndices(x)
        : spec.index(x as string | number)));
    assert.deepEqual(values, c.values as Value[]);
    const oracle = spec.oracle();
    const src = new WordStream(c.words);
    let reports: Report[] = values.map((v) => oracle.perturb(v, src));
    if (c.permanent) {
      assert.deepEqual(toRecords(spec, oracle.columns, reports), c.permanent);
      const inst = makeRerandomizer(oracle, spec.epsilon1 as number);
      reports = reports.map((r) => inst.rerandomize(r, src));
    }
    assert.equal(src.used, c.words.length);
    assert.deepEqual(toRecords(spec, oracle.columns, reports), c.reports);
    assert.equal(hex(encodeBinary(spec, oracle.columns, reports)), c.message_binary);
    assert.equal(encodeJson(spec, oracle.columns, reports), c.message_json);
    for (const row of c.phases ?? []) {
      const dev = new Device(spec, { store: new MemoryStore(),
        secret: Buffer.from(row.secret, "hex") });
      assert.equal(await dev.takesPart(), row.takes_part, `secret ${row.secret}`);
      assert.equal((await dev.message(c.inputs[0], 0)) !== null, row.takes_part);
    }
  });
}

for (const c of loadPermanentCases()) {
  test(`permanent ${c.name}`, async () => {
    const spec = CollectionSpec.fromJson(c.collection);
    const secret = Buffer.from(c.secret, "hex");
    const words = new PermanentWords(secret, spec.fingerprint, c.keys[0]);
    assert.deepEqual(c.words.map(() => words.nextU32()), c.words);
    const dev = new Device(spec, { store: new MemoryStore(), secret });
    const reports: Report[] = [];
    for (const x of c.inputs) reports.push(await dev.permanent(x));
    const oracle = spec.oracle();
    assert.deepEqual(toRecords(spec, oracle.columns, reports), c.permanent);
    assert.equal(hex(encodeBinary(spec, oracle.columns, reports)), c.message_binary);
    assert.equal(encodeJson(spec, oracle.columns, reports), c.message_json);
  });
}

test("a spec whose served fingerprint differs is refused", () => {
  const c = loadCases()[0];
  const raw = { ...c.collection, min_reports: 101 };
  assert.throws(() => CollectionSpec.fromJson(raw), /fingerprint/);
  assert.equal(fingerprintOf({ a: 1 }), "015abd7f5cc57a2d");
});

test("floats print as Python's repr", () => {
  const cases: Array<[number, string]> = [[1, "1.0"], [0.1, "0.1"], [1e-5, "1e-05"],
    [1e-4, "0.0001"], [1e16, "1e+16"], [1234567890123456, "1234567890123456.0"],
    [-2.5e-300, "-2.5e-300"], [0.1 + 0.2, "0.30000000000000004"], [5e-324, "5e-324"],
    [123.456, "123.456"], [1e22, "1e+22"]];
  for (const [x, want] of cases) assert.equal(pyFloat(x), want);
});
