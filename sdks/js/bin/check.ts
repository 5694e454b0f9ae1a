/**
 * Whether the SDK accepts served specs: `node dist/bin/check.js SPECS.json` reads a JSON list
 * of collections and prints one JSON line per spec, `{"ok": true}` or `{"ok": false,
 * "error": ..., "parameter": ...}`. Used by tests/sdks to compare with ldpcore's ranges.
 */
import { readFileSync } from "node:fs";

import { SpecError } from "../src/errors.js";
import { CollectionSpec } from "../src/spec.js";

for (const raw of JSON.parse(readFileSync(process.argv[2], "utf8")) as unknown[]) {
  try {
    CollectionSpec.fromJson(raw);
    process.stdout.write(`${JSON.stringify({ ok: true })}\n`);
  } catch (e) {
    const err = e as Error;
    process.stdout.write(`${JSON.stringify({ ok: false, error: err.message, type: err.name,
      parameter: e instanceof SpecError ? e.parameter : null })}\n`);
  }
}
