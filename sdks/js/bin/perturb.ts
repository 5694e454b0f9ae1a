/**
 * Batch perturbation for the Python-side statistical checks (tests/sdks): for every pair
 * of arguments REQUEST OUTPUT, reads `{"collection": spec, "values": [domain indices]}`
 * from REQUEST (a set-valued collection: lists of item indices; multi: lists of
 * per-attribute indices), perturbs every value with a fresh device's draw (CSPRNG; two-level
 * collections: permanent answer then one re-randomized report) and writes one binary
 * message with all reports to OUTPUT.
 */
import { readFileSync, writeFileSync } from "node:fs";

import { encodeBinary } from "../src/encode.js";
import { Report } from "../src/mechanisms.js";
import { CryptoSource } from "../src/random.js";
import { CollectionSpec } from "../src/spec.js";

const src = new CryptoSource();
for (let i = 2; i + 1 < process.argv.length; i += 2) {
  const req = JSON.parse(readFileSync(process.argv[i], "utf8"));
  const spec = CollectionSpec.fromJson(req.collection);
  const { oracle, instant } = spec.channels();
  const reports: Report[] = (req.values as Array<number | string | number[]>).map((v) => {
    const r = oracle.perturb(typeof v === "string" ? BigInt(v) : v, src);
    return instant ? instant.rerandomize(r, src) : r;
  });
  writeFileSync(process.argv[i + 1], encodeBinary(spec, oracle.columns, reports));
}
