/**
 * A small Node app reporting one value with the ldpstream SDK, as a developer would write it:
 *
 *   node report.js https://api.example.org https://ingest.example.org app-version 3.2.1
 *
 * It fetches the collection's spec from the query API (verified against its fingerprint and
 * ldpcore's parameter ranges), makes this window's report — the permanent answer derived from
 * the device secret kept under the user data directory — queues it, and posts the queue to
 * the gateway. Run it as often as you like: the cadence and the answer are the store's.
 */
import { Device, GatewayClient, defaultStore, fetchSpec } from "@ldpstream/sdk";

declare const process: { argv: string[]; exitCode?: number; env: Record<string, string | undefined> };

async function main(): Promise<void> {
  const [api, gateway, collection, raw] = process.argv.slice(2);
  const spec = await fetchSpec(api, collection);
  // a label for a categories domain, else a number
  const value = spec.domain.kind === "categories" ? raw : Number(raw);
  const device = new Device(spec); // the platform store: a file under the user data dir
  const queued = await device.enqueue(value);
  const client = new GatewayClient({ url: gateway, apiKey: process.env.LDP_DEVICE_KEY });
  const result = await client.sendQueued(await defaultStore());
  console.log(JSON.stringify({ queued, ...result }));
}

main().catch((err: Error) => {
  console.error(err.message);
  process.exitCode = 1;
});
