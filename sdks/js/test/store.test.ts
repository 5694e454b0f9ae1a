/** The file store (Node) under concurrency: worker threads, Device instances and processes
 * on one store never make two answers or lose a cadence entry or a queued report. */
import assert from "node:assert/strict";
import { fork } from "node:child_process";
import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";

import { Device } from "../src/device.js";
import { FileStore, defaultStorePath } from "../src/file-store.js";
import { CollectionSpec, StoreError } from "../src/index.js";

const HERE = fileURLToPath(new URL(".", import.meta.url));
const CHILD = join(HERE, "store-child.js");
const tmp = (): string => mkdtempSync(join(tmpdir(), "ldp-store-"));

const RAW = { oracle: { mechanism: "oue", epsilon: 1.0, domain_size: 8 },
  domain: { kind: "integers", low: 0, high: 7 }, window_seconds: 60 };

interface ChildOut { shared: string; sent: number }

/** Run `n` copies of store-child.js (in worker threads or processes) against one store. */
async function race(kind: "thread" | "process", n: number, path: string): Promise<ChildOut[]> {
  const runs = Array.from({ length: n }, (_, i) => new Promise<ChildOut>((resolve, reject) => {
    const args = [JSON.stringify(RAW), path, `${kind[0]}${i}`];
    if (kind === "thread") {
      const w = new Worker(CHILD, { argv: args });
      w.on("message", resolve);
      w.on("error", reject);
    } else {
      const p = fork(CHILD, args, { stdio: ["ignore", "ignore", "inherit", "ipc"] });
      p.on("message", (m) => resolve(m as ChildOut));
      p.on("exit", (code) => { if (code !== 0) reject(new Error(`child exit ${code}`)); });
    }
  }));
  return Promise.all(runs);
}

function check(path: string, outs: ChildOut[], n: number): void {
  const doc = JSON.parse(readFileSync(path, "utf8"));
  // each child: 25 reports to its own collections, all queued; the shared collection's one
  // report of the window made once by all of them together, with one permanent answer
  assert.equal(doc.outbox.length, n * 25 + 1);
  assert.equal(new Set(doc.outbox.map((e: { key: string }) => e.key)).size, n * 25 + 1);
  assert.equal(Object.keys(doc.collections).length, n * 25 + 1);
  assert.equal(outs.reduce((s, o) => s + o.sent, 0), 1);
  assert.equal(new Set(outs.map((o) => o.shared)).size, 1);
}

test("worker threads on one store file lose nothing and agree", async () => {
  const path = join(tmp(), "store.json");
  check(path, await race("thread", 6, path), 6);
});

test("two processes on one store file lose nothing and agree", async () => {
  const path = join(tmp(), "store.json");
  check(path, await race("process", 2, path), 2);
  assert.equal(statSync(path).mode & 0o777, 0o600);
});

test("many Devices in one process share one secret and one cadence", async () => {
  const path = join(tmp(), "store.json");
  const spec = new CollectionSpec({ id: "one", ...RAW } as never);
  const devices = Array.from({ length: 20 }, () => new Device(spec, { store: new FileStore(path) }));
  const answers = await Promise.all(devices.map((d) => d.report(5)));
  assert.equal(new Set(answers.map((a) => JSON.stringify(a))).size, 1);
  const made = await Promise.all(devices.map((d) => d.enqueue(5, { now: 60 })));
  assert.equal(made.filter(Boolean).length, 1);
});

test("a lock left by a dead process is broken; a corrupt store is refused, not replaced",
  async () => {
    const dir = tmp();
    const path = join(dir, "store.json");
    writeFileSync(`${path}.lock-owner`, JSON.stringify({ pid: 2 ** 22 + 12345,
      host: (await import("node:os")).hostname(), token: "dead", since: Date.now() }));
    const spec = new CollectionSpec({ id: "one", ...RAW } as never);
    assert.equal(await new Device(spec, { store: new FileStore(path) }).enqueue(1), true);
    writeFileSync(path, "{\"format\": \"ldpstream-device-memo\", \"version\": 1}");
    await assert.rejects(new Device(spec, { store: new FileStore(path) }).enqueue(1),
      (e: unknown) => e instanceof StoreError && /SDK 0\.1/.test((e as Error).message));
    assert.match(readFileSync(path, "utf8"), /device-memo/);
  });

test("the default store is under the user data directory, as Python's platformdirs", () => {
  assert.equal(defaultStorePath({ XDG_DATA_HOME: "/x/data" }, "linux"),
    "/x/data/ldpstream/device-store.json");
  assert.match(defaultStorePath({}, "linux"), /\.local\/share\/ldpstream\/device-store\.json$/);
  assert.match(defaultStorePath({}, "darwin"),
    /Library\/Application Support\/ldpstream\/device-store\.json$/);
  assert.equal(defaultStorePath({ LOCALAPPDATA: "C:\\u" }, "win32").replace(/\\/g, "/"),
    "C:/u/ldpstream/device-store.json");
});
