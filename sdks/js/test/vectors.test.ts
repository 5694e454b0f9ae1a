/** The shared test vectors (sdks/vectors, generated from ldpcore) pass byte for byte. */
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  CollectionSpec, Device, Input, Report, Value, WordStream, canonicalJson, encodeBinary,
  encodeJson, fingerprintOf, makeRerandomizer, toRecords,
} from "../src/index.js";
import { loadCases } from "./cases.js";

const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");

for (const c of loadCases()) {
  test(`vector ${c.name}`, () => {
    const spec = CollectionSpec.fromJson(c.collection);
    assert.equal(canonicalJson(spec.canonical()), c.canonical);
    assert.equal(spec.fingerprint, c.fingerprint);
    assert.equal(spec.oracleFingerprint, c.oracle_fingerprint);
    const values: Value[] = c.inputs.map((x: Input) => (spec.setValued
      ? spec.indexSet(x as Array<string | number>)
      : spec.domain.kind === "attributes" ? spec.attributeIndices(x)
        : spec.index(x as string | number)));
    assert.deepEqual(values, c.values);
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
      const dev = new Device(spec, { secret: Buffer.from(row.secret, "hex") });
      assert.equal(dev.takesPart(), row.takes_part, `secret ${row.secret}`);
      assert.equal(dev.message(c.inputs[0], 0) !== null, row.takes_part);
    }
  });
}

test("a spec whose served fingerprint differs is refused", () => {
  const c = loadCases()[0];
  const raw = { ...c.collection, min_reports: 101 };
  assert.throws(() => CollectionSpec.fromJson(raw), /fingerprint/);
  assert.equal(fingerprintOf({ a: 1 }), "015abd7f5cc57a2d");
});

test("floats print as Python's repr", async () => {
  const { pyFloat } = await import("../src/index.js");
  const cases: Array<[number, string]> = [[1, "1.0"], [0.1, "0.1"], [1e-5, "1e-05"],
    [1e-4, "0.0001"], [1e16, "1e+16"], [1234567890123456, "1234567890123456.0"],
    [-2.5e-300, "-2.5e-300"], [0.1 + 0.2, "0.30000000000000004"], [5e-324, "5e-324"],
    [123.456, "123.456"], [1e22, "1e+22"]];
  for (const [x, want] of cases) assert.equal(pyFloat(x), want);
});
