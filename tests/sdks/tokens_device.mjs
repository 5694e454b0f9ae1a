// One run of TypeScript SDK devices with Privacy Pass (driven by tests/sdks/test_sdk_tokens.py):
// node tokens_device.mjs <sdk dist index.js> <request.json>; prints JSON counts.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [sdkPath, reqPath] = process.argv.slice(2);
const sdk = await import(pathToFileURL(sdkPath).href);
const req = JSON.parse(readFileSync(reqPath, "utf8"));
const spec = sdk.CollectionSpec.fromJson(req.collection);
const out = { honest: 0, greedy_accepted: 0, greedy_refused: 0, reasons: [] };
// distinct per device: i in the first 4 bytes, a per-run salt after
const salt = crypto.getRandomValues(new Uint8Array(12));
const secret = (i) => new Uint8Array([i & 255, (i >> 8) & 255, (i >> 16) & 255, i >>> 24,
  ...salt]);
for (let i = 0; i < req.honest; i++) {
  const dev = new sdk.Device(spec, { store: new sdk.MemoryStore() }); // a new device
  const client = new sdk.GatewayClient({ url: req.gateway, apiKey: req.key,
    issuerUrl: req.issuer, deviceSecret: secret(i) });
  const res = i % 2 === 0 ? await client.send(await dev.message(req.values[i]))
    : await client.sendJson(await dev.messageJson(req.values[i]));
  out.honest += res.accepted_reports;
}
const greedy = new sdk.GatewayClient({ url: req.gateway, apiKey: req.key, issuerUrl: req.issuer,
  deviceSecret: secret(9999) });
for (let j = 0; j < req.greedy_posts; j++) {
  // the greedy device resets its store to make a report per post; its tokens stop it
  const dev = new sdk.Device(spec, { store: new sdk.MemoryStore() });
  try {
    const res = await greedy.send(await dev.message(req.values[0]));
    out.greedy_accepted += res.accepted_reports;
  } catch (err) {
    out.greedy_refused += 1;
    out.reasons.push(err.reason ?? err.body?.reason ?? String(err));
  }
}
process.stdout.write(JSON.stringify(out));
