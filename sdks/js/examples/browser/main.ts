/**
 * The browser example: a page that reports one value with the ldpstream SDK and shows the
 * collection's live answer. Open index.html?api=…&gateway=…&collection=…&value=… (the query
 * API and the gateway may be on other origins: LDP_CORS_ORIGINS lists this page's origin).
 *
 * The device secret and the cadence live in IndexedDB: reloading the page sends nothing new in
 * the same window, and the permanent answer is the same after any reload.
 */
import { Device, GatewayClient, defaultStore, fetchSpec } from "@ldpstream/sdk";

const params = new URLSearchParams(location.search);
const out = document.getElementById("out") as HTMLElement;
const show = (x: unknown): void => { out.textContent = JSON.stringify(x, null, 1); };
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<Record<string, unknown>> {
  const api = params.get("api") ?? location.origin;
  const collection = params.get("collection") ?? "app-version";
  const spec = await fetchSpec(api, collection);               // cross-origin GET (CORS)
  const raw = params.get("value") ?? "";
  const device = new Device(spec);                              // IndexedDB store
  const queued = await device.enqueue(spec.domain.kind === "categories" ? raw : Number(raw));
  const client = new GatewayClient({ url: params.get("gateway") ?? location.origin,
    apiKey: params.get("key") ?? undefined });
  const sent = await client.sendQueued(await defaultStore());  // cross-origin POST (preflight)
  // the collection's answer, once the report is counted
  const url = `${api}/v1/collections/${encodeURIComponent(collection)}/frequencies`;
  for (let i = 0; i < 120; i++) {
    const resp = await fetch(url, { headers: { accept: "application/json" } });
    if (resp.ok) {
      return { fingerprint: spec.fingerprint, queued, sent, answer: await resp.json(),
        stateVersion: resp.headers.get("x-state-version") };
    }
    await sleep(250);
  }
  throw new Error(`no answer from ${url}`);
}

main().then((r) => { show(r); (window as unknown as { __result: unknown }).__result = r; },
  (e: Error) => {
    show({ error: e.message });
    (window as unknown as { __result: unknown }).__result = { error: String(e.stack ?? e) };
  });
