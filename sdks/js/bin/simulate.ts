/**
 * End-to-end driver (tests/sdks/test_sdk_e2e.py): argv[2] = gateway URL, argv[3] = a JSON
 * file `{"collection": spec, "values": [...], "format": "binary" | "json", "batch": n}`.
 * Every value is one simulated device (its own Device, store, secret and cadence) that
 * builds one message; the messages go to the gateway `batch` at a time (binary: one
 * x-ldp-frames body; json: one JSON array) through GatewayClient. Prints the summed
 * `{"accepted_messages", "accepted_reports"}`.
 */
import { readFileSync } from "node:fs";

import { CollectionSpec, Device, GatewayClient, MemoryStore } from "../src/index.js";

async function main(): Promise<void> {
  const req = JSON.parse(readFileSync(process.argv[3], "utf8"));
  const spec = CollectionSpec.fromJson(req.collection);
  const client = new GatewayClient({ url: process.argv[2], apiKey: req.api_key });
  const batch: number = req.batch ?? 500;
  const total = { accepted_messages: 0, accepted_reports: 0 };
  const values = req.values as Array<number | string>;
  for (let start = 0; start < values.length; start += batch) {
    const chunk = values.slice(start, start + batch);
    const device = (): Device => new Device(spec, { store: new MemoryStore() });
    const out = req.format === "json"
      ? await client.sendJson(await Promise.all(chunk.map(async (v) =>
        (await device().messageJson(v)) as string)))
      : await client.send(await Promise.all(chunk.map(async (v) =>
        (await device().message(v)) as Uint8Array)));
    total.accepted_messages += out.accepted_messages;
    total.accepted_reports += out.accepted_reports;
  }
  process.stdout.write(JSON.stringify(total) + "\n");
}

main().catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
});
