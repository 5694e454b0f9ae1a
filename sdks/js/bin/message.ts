/**
 * One device action from the command line, on a device store file (the Python SDK's format):
 * `node dist/bin/message.js SPEC.json VALUE STORE.json NOW [json|enqueue|permanent]` (VALUE
 * may be a JSON list or object: a set, an attribute tuple) prints the binary message as hex
 * (or the JSON text; `enqueue`: true/false; `permanent`: the permanent answer's JSON record),
 * or `null` when the cadence is used up. Used by tests/sdks to check that stores move
 * between the SDKs and Python.
 */
import { readFileSync } from "node:fs";

import { Device } from "../src/device.js";
import { FileStore } from "../src/file-store.js";
import { CollectionSpec } from "../src/spec.js";

async function main(): Promise<void> {
  const [specPath, raw, storePath, now, mode] = process.argv.slice(2);
  const spec = CollectionSpec.fromJson(JSON.parse(readFileSync(specPath, "utf8")));
  // A JSON list or object: a set of labels, or an attribute tuple.
  const value = raw.startsWith("[") || raw.startsWith("{") ? JSON.parse(raw)
    : spec.domain.kind === "categories" ? raw : Number(raw);
  const device = new Device(spec, { store: new FileStore(storePath), clock: () => Number(now) });
  let out: string;
  if (mode === "json") {
    out = (await device.messageJson(value)) ?? "null";
  } else if (mode === "enqueue") {
    out = String(await device.enqueue(value));
  } else if (mode === "permanent") {
    out = JSON.stringify(await device.permanent(value));
  } else {
    const msg = await device.message(value);
    out = msg ? Buffer.from(msg).toString("hex") : "null";
  }
  process.stdout.write(`${out}\n`);
}

main().catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
});
