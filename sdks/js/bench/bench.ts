/** Perturbation speed per mechanism (reports per second, CSPRNG draws included). */
import { encodeBinary } from "../src/encode.js";
import { Report, Value } from "../src/mechanisms.js";
import { CryptoSource } from "../src/random.js";
import { CollectionSpec } from "../src/spec.js";
import { BENCH_CASES } from "./cases.js";

const src = new CryptoSource();
console.log("mechanism      params                      reports/s   (encode incl.)");
for (const [name, collection] of BENCH_CASES) {
  const spec = CollectionSpec.fromJson(collection);
  const { oracle, instant } = spec.channels();
  const size = Number(spec.domainSize());
  // set-valued: a 3-item set per report; other mechanisms (multi too): a domain index
  const value = (i: number): Value => (spec.setValued
    ? [i % size, (7 * i + 1) % size, (13 * i + 5) % size] : i % size);
  const run = (n: number): number => {
    const t0 = performance.now();
    const reports: Report[] = [];
    for (let i = 0; i < n; i++) {
      const r = oracle.perturb(value(i), src);
      reports.push(instant ? instant.rerandomize(r, src) : r);
    }
    encodeBinary(spec, oracle.columns, reports);
    return (performance.now() - t0) / 1000;
  };
  run(2000); // warm up the JIT
  let n = 5000, secs = run(n);
  while (secs < 0.3) { n *= 4; secs = run(n); }
  for (let rep = 0; rep < 2; rep++) secs = Math.min(secs, run(n)); // best of three
  console.log(`${name.padEnd(40)} ${Math.round(n / secs).toLocaleString("en-US").padStart(12)}`);
}
