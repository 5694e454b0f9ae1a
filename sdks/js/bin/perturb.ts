/**
 * Batch perturbation for the Python-side statistical checks (tests/sdks): reads
 * `{"collection": spec, "values": [domain indices]}` from argv[2], perturbs every value
 * with a fresh device's draw (CSPRNG; two-level collections: permanent answer then one
 * re-randomized report) and writes one binary message with all reports to argv[3].
 */
import { readFileSync, writeFileSync } from "node:fs";

import { CollectionSpec, CryptoSource, Report, encodeBinary } from "../src/index.js";

const req = JSON.parse(readFileSync(process.argv[2], "utf8"));
const spec = CollectionSpec.fromJson(req.collection);
const { oracle, instant } = spec.channels();
const src = new CryptoSource();
const reports: Report[] = (req.values as Array<number | string>).map((v) => {
  const r = oracle.perturb(typeof v === "string" ? BigInt(v) : v, src);
  return instant ? instant.rerandomize(r, src) : r;
});
writeFileSync(process.argv[3], encodeBinary(spec, oracle.columns, reports));
