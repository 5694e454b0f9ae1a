/**
 * The averaging attack over app reloads (bench/sdk_reloads.py): `node dist/bench/reloads.js
 * SPEC.json TRUTH.json RELOADS file|memory DIR` — for every user (a true label in TRUTH),
 * RELOADS times a new Device (an app start) on the user's store — a file under DIR, or a new
 * MemoryStore each time (no persistence) — reports the value. Prints, per user, the answers
 * as a JSON list of lists.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";

import { Device } from "../src/device.js";
import { FileStore } from "../src/file-store.js";
import { CollectionSpec } from "../src/spec.js";
import { MemoryStore } from "../src/store.js";

async function main(): Promise<void> {
  const [specPath, truthPath, reloads, mode, dir] = process.argv.slice(2);
  const spec = CollectionSpec.fromJson(JSON.parse(readFileSync(specPath, "utf8")));
  const truth = JSON.parse(readFileSync(truthPath, "utf8")) as string[];
  const out: number[][] = [];
  for (let u = 0; u < truth.length; u++) {
    const answers: number[] = [];
    for (let r = 0; r < Number(reloads); r++) {
      const store = mode === "file" ? new FileStore(join(dir, `u${u}.json`)) : new MemoryStore();
      answers.push((await new Device(spec, { store }).report(truth[u])).y as number);
    }
    out.push(answers);
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => { process.stderr.write(`${(e as Error).stack}\n`); process.exit(1); });
