/**
 * One device of one collection: maps values to the domain, perturbs, keeps the reporting
 * cadence and queues reports, as the Python SDK (producer/sdk.py):
 *
 * - memoization "permanent": a value's answer is *derived* from the device secret
 *   (HMAC-SHA256 over the collection fingerprint and the value; docs/wire-format.md,
 *   "Permanent answers"), so it is the same after every restart, in every SDK, with nothing
 *   stored but the secret; "two-level": that answer re-randomized at epsilon_1 for every
 *   report; "none": a fresh answer per report;
 * - cadence: at most `reports_per_window` reports per tumbling window, counted in the store
 *   (shared by every Device, tab and process on it);
 * - store: the secret, the cadence and the outbox live in the platform's private store
 *   (`defaultStore()`: IndexedDB in browsers, a file under the user data directory in Node);
 * - randomness: `crypto.getRandomValues` only (`testOnlyDraws` replaces it in tests).
 */
import { checkEpsilon1 } from "./checks.js";
import { encodeBinary, encodeJson } from "./encode.js";
import { Oracle, Report, Rerandomizer, Value } from "./mechanisms.js";
import { CryptoSource, DrawSource, PermanentWords, randomUuid } from "./random.js";
import { hmacSha256 } from "./sha256.js";
import { CollectionSpec, Input, PHASES } from "./spec.js";
import {
  Cadence, DeviceStore, KeyValueStorage, KeyValueStore, StoreDocument, defaultStore, ensureSecret,
  pushReport,
} from "./store.js";

/**
 * The phase (index) of a partitioned protocol group a device takes part in
 * (ldpcore.setvalued.phases.device_phase): u = the first 8 bytes of
 * HMAC-SHA256(secret, group), big-endian, / 2^64; the number of running sums of
 * `fractions` that are <= u, capped at the last phase.
 */
export function devicePhase(secret: Uint8Array, group: string, fractions: number[]): number {
  const mac = hmacSha256(secret, new TextEncoder().encode(group));
  let x = 0n;
  for (let i = 0; i < 8; i++) x = (x << 8n) | BigInt(mac[i]);
  const u = Number(x) / 18446744073709551616;
  let cum = 0;
  let pos = 0;
  for (const f of fractions) {
    cum += f;
    if (cum <= u) pos++;
  }
  return Math.min(pos, fractions.length - 1);
}

const fromHex = (h: string): Uint8Array =>
  new Uint8Array(h.match(/../g)?.map((x) => parseInt(x, 16)) ?? []);
const toHex = (b: Uint8Array): string => Array.from(b, (x) => x.toString(16).padStart(2, "0"))
  .join("");

export interface DeviceOptions {
  /** Where the secret, the cadence and the queue live (default `defaultStore()`); a
   * `MemoryStore` opts out of persistence (see the README for what that gives up). */
  store?: DeviceStore;
  /** Seconds since the epoch (default Date.now() / 1000). */
  clock?: () => number;
  /** The device secret (16 to 64 bytes) instead of the store's: an app that keeps it in its
   * own keystore. */
  secret?: Uint8Array;
  /** Tests only: fresh draws (and a new secret) from this source instead of the CSPRNG. */
  testOnlyDraws?: DrawSource;
  /** SDK 0.1's option: a localStorage-like storage, the same as
   * `store: new KeyValueStore(storage, storageKey)`. */
  storage?: KeyValueStorage;
  storageKey?: string;
}

/** Options of `enqueue`. */
export interface EnqueueOptions {
  format?: "binary" | "json";
  /** Seconds since the epoch (default: the clock). */
  now?: number;
}

export class Device {
  readonly oracle: Oracle;
  private readonly instant: Rerandomizer | null;
  private readonly draws: DrawSource;
  private readonly clock: () => number;
  private readonly answers = new Map<string, Report>();
  private storeP: Promise<DeviceStore> | null;
  private secretBytes: Uint8Array | null;

  constructor(readonly spec: CollectionSpec, private readonly options: DeviceOptions = {}) {
    const { oracle, instant } = spec.channels();
    if (spec.epsilon1 !== null) checkEpsilon1(spec.epsilon1);
    this.oracle = oracle;
    this.instant = instant;
    this.draws = options.testOnlyDraws ?? new CryptoSource();
    this.clock = options.clock ?? (() => Date.now() / 1000);
    if (options.store && options.storage) throw new RangeError("give store or storage, not both");
    const store = options.store ?? (options.storage
      ? new KeyValueStore(options.storage, options.storageKey) : undefined);
    this.storeP = store ? Promise.resolve(store) : null;
    if (options.secret && (options.secret.length < 16 || options.secret.length > 64)) {
      throw new RangeError("secret must be 16 to 64 bytes");
    }
    this.secretBytes = options.secret ? options.secret.slice() : null;
  }

  /** The store this device keeps its state in. */
  store(): Promise<DeviceStore> {
    if (!this.storeP) this.storeP = defaultStore();
    return this.storeP;
  }

  /** The device secret (the store's, drawn on first use, unless one was given). */
  async secret(): Promise<Uint8Array> {
    if (!this.secretBytes) {
      const make = this.options.testOnlyDraws ? (): Uint8Array => {
        const out = new Uint8Array(32);
        const v = new DataView(out.buffer);
        for (let i = 0; i < 8; i++) v.setUint32(4 * i, this.draws.nextU32(), true);
        return out;
      } : undefined;
      const hex = await (await this.store()).update((doc) => ensureSecret(doc, make));
      this.secretBytes = fromHex(hex);
    }
    return this.secretBytes;
  }

  /** The oracle's input and the memo key of a raw value: a domain index; for a set-valued
   * collection the item indices (key -1 - their bitmask); for multi the per-attribute
   * indices (key their mixed-radix index) — as the Python SDK. */
  private input(value: Input): [Value, string] {
    if (this.spec.setValued) {
      const items = this.spec.indexSet(value as Iterable<string | number | bigint>);
      const mask = items.reduce((m, i) => m | (1n << BigInt(i)), 0n);
      return [items, String(-1n - mask)];
    }
    if (this.spec.domain.kind === "attributes") {
      const row = this.spec.attributeIndices(value);
      return [row, String(this.spec.combine(row))];
    }
    const idx = this.spec.index(value as string | number | bigint);
    return [idx, String(idx)];
  }

  /** False when a partitioned protocol (svim, svsm) puts this device in another phase of
   * the collection's group: then it makes no report for this collection. */
  async takesPart(): Promise<boolean> {
    const p = this.spec.protocol;
    if (!p || !p.fractions) return true;
    return PHASES[p.name][devicePhase(await this.secret(), p.group, p.fractions)] === p.phase;
  }

  /** The permanent answer of a value: derived from the secret, the collection's fingerprint
   * and the value (docs/wire-format.md, "Permanent answers"). */
  async permanent(value: Input): Promise<Report> {
    const [idx, key] = this.input(value);
    let rep = this.answers.get(key);
    if (rep === undefined) {
      rep = this.oracle.perturb(idx, new PermanentWords(await this.secret(),
        this.spec.fingerprint, key));
      this.answers.set(key, rep);
    }
    return rep;
  }

  /** The report of a value (a label / number; a set of them; an attribute tuple), per the
   * memoization policy; it does not count toward the cadence. */
  async report(value: Input): Promise<Report> {
    if (this.spec.memoization === "none") return this.oracle.perturb(this.input(value)[0], this.draws);
    const rep = await this.permanent(value);
    return this.instant ? this.instant.rerandomize(rep, this.draws) : rep;
  }

  /** Start (epoch s) of the collection window holding `now` (default: the clock). */
  currentWindow(now?: number): number {
    return this.spec.windowStart(now ?? this.clock());
  }

  private cadence(doc: StoreDocument): Cadence {
    return doc.collections[this.spec.fingerprint] ??
      { collection: this.spec.id, window: null, sent: 0 };
  }

  private allowed(c: Cadence, window: number): boolean {
    return c.window !== window || c.sent < this.spec.reportsPerWindow;
  }

  /** True unless the cadence is used up in the current window. */
  async canReport(now?: number): Promise<boolean> {
    const window = this.currentWindow(now);
    return (await this.store()).update((doc) => this.allowed(this.cadence(doc), window));
  }

  /** Spend one report of `window`'s cadence in the store, atomically with `then`. */
  private async spend(window: number, then?: (doc: StoreDocument) => void): Promise<boolean> {
    return (await this.store()).update((doc) => {
      const c = this.cadence(doc);
      if (!this.allowed(c, window)) return false;
      doc.collections[this.spec.fingerprint] = { ...c, collection: this.spec.id, window,
        sent: c.window === window ? c.sent + 1 : 1 };
      then?.(doc);
      return true;
    });
  }

  private async make(value: Input, json: boolean, now?: number
  ): Promise<[number, Uint8Array | string] | null> {
    const window = this.currentWindow(now);
    if (!(await this.canReport(now)) || !(await this.takesPart())) return null;
    const rep = await this.report(value);
    const cols = this.oracle.columns;
    return [window, json ? encodeJson(this.spec, cols, [rep]) : encodeBinary(this.spec, cols, [rep])];
  }

  /** The binary message of one report (the cadence spent), or null when the window's
   * cadence is used up (or the device is in another phase). Not queued: see `enqueue`. */
  async message(value: Input, now?: number): Promise<Uint8Array | null> {
    const made = await this.make(value, false, now);
    return made && (await this.spend(made[0])) ? made[1] as Uint8Array : null;
  }

  /** The JSON message text of one report, or null when the cadence is used up. */
  async messageJson(value: Input, now?: number): Promise<string | null> {
    const made = await this.make(value, true, now);
    return made && (await this.spend(made[0])) ? made[1] as string : null;
  }

  /**
   * Make one report and queue it in the store, in one step (the cadence is spent when the
   * report is made; it is never perturbed again). False when the cadence is used up. The
   * queue is posted by `GatewayClient.sendQueued`, which forgets a report only once the
   * gateway acknowledged it.
   */
  async enqueue(value: Input, options: EnqueueOptions = {}): Promise<boolean> {
    const json = options.format === "json";
    const made = await this.make(value, json, options.now);
    if (!made) return false;
    const [window, msg] = made;
    const body = typeof msg === "string" ? new TextEncoder().encode(msg) : msg;
    const store = await this.store();
    const entry = { key: randomUuid(), collection: this.spec.id,
      fingerprint: this.spec.fingerprint,
      type: json ? "application/json" : "application/octet-stream", body: toHex(body), window };
    return this.spend(window, (doc) => pushReport(doc, entry, store.queueLimit));
  }
}
