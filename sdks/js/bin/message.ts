/**
 * One device message from the command line, with the memo in a file (the Python SDK's memo
 * file format): `node dist/bin/message.js SPEC.json VALUE MEMO.json NOW [json]` (VALUE may be
 * a JSON list or object: a set, an attribute tuple) prints the
 * binary message as hex (or the JSON text), or `null` when the cadence is used up.
 * Used by tests/sdks to check that memo files move between the SDKs and Python.
 */
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";

import { CollectionSpec, Device, KeyValueStorage } from "../src/index.js";

class FileStorage implements KeyValueStorage {
  constructor(private readonly path: string) {}
  getItem(): string | null {
    return existsSync(this.path) ? readFileSync(this.path, "utf8") : null;
  }
  setItem(_key: string, value: string): void {
    writeFileSync(`${this.path}.tmp`, value, { mode: 0o600 });
    renameSync(`${this.path}.tmp`, this.path);
  }
}

const [specPath, raw, memo, now, fmt] = process.argv.slice(2);
const spec = CollectionSpec.fromJson(JSON.parse(readFileSync(specPath, "utf8")));
// A JSON list or object: a set of labels, or an attribute tuple.
const value = raw.startsWith("[") || raw.startsWith("{") ? JSON.parse(raw)
  : spec.domain.kind === "categories" ? raw : Number(raw);
const device = new Device(spec, { storage: new FileStorage(memo), clock: () => Number(now) });
if (fmt === "json") {
  process.stdout.write(`${device.messageJson(value) ?? "null"}\n`);
} else {
  const msg = device.message(value);
  process.stdout.write(`${msg ? Buffer.from(msg).toString("hex") : "null"}\n`);
}
