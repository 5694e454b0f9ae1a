/** One racer of store.test.ts (a worker thread or a forked process). */
import { parentPort, workerData } from "node:worker_threads";

import { Device } from "../src/device.js";
import { FileStore } from "../src/file-store.js";
import { CollectionSpec } from "../src/spec.js";

async function main(): Promise<void> {
  void workerData;
  const argv = process.argv.slice(2);
  const [raw, path, tag] = argv;
  const base = JSON.parse(raw);
  const store = new FileStore(path);
  for (let i = 0; i < 25; i++) {
    const dev = new Device(new CollectionSpec({ ...base, id: `${tag}-${i}` }), { store });
    if (!(await dev.enqueue(3, { now: 1.8e9 }))) throw new Error("cadence refused");
  }
  const shared = new CollectionSpec({ ...base, id: "shared" });
  let sent = 0;
  for (let i = 0; i < 5; i++) {
    if (await new Device(shared, { store: new FileStore(path) }).enqueue(3, { now: 1.8e9 })) sent++;
  }
  const answer = JSON.stringify(await new Device(shared, { store }).permanent(3));
  const out = { shared: answer, sent };
  if (parentPort) parentPort.postMessage(out);
  else process.send?.(out);
}

main().catch((e) => {
  process.stderr.write(`${(e as Error).stack}\n`);
  process.exit(1);
});
