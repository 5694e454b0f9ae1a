/**
 * One device of one collection: maps values to the domain, perturbs, memoizes and keeps the
 * reporting cadence exactly as the Python SDK (producer/sdk.py):
 *
 * - memoization "permanent": the answer of a value is drawn once and resent verbatim;
 *   "two-level": the permanent answer is re-randomized at epsilon_1 for every report;
 *   "none": a fresh answer per report;
 * - cadence: `message` returns null once `reports_per_window` messages were built in the
 *   current tumbling window;
 * - persistence: with a `storage` (localStorage-like) the memo and the cadence are saved
 *   after every change in the Python SDK's memo format and reloaded on construction;
 * - randomness: `crypto.getRandomValues` unless a DrawSource is injected (tests only).
 */
import { encodeBinary, encodeJson } from "./encode.js";
import { Oracle, Report, Rerandomizer, Value } from "./mechanisms.js";
import { CryptoSource, DrawSource } from "./random.js";
import { hmacSha256 } from "./sha256.js";
import { CollectionSpec, Input, PHASES } from "./spec.js";

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

const toHex = (b: Uint8Array): string => Array.from(b, (x) => x.toString(16).padStart(2, "0"))
  .join("");

/** The part of the Web Storage API the device uses (e.g. `localStorage`). */
export interface KeyValueStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

export interface DeviceOptions {
  source?: DrawSource;
  storage?: KeyValueStorage;
  /** Storage key of the memo document (default "ldpstream-device-memo"). */
  storageKey?: string;
  /** Seconds since the epoch (default Date.now() / 1000). */
  clock?: () => number;
  /** The device secret that picks its phase of a partitioned protocol group (default: 16
   * CSPRNG bytes drawn once and kept in the memo). */
  secret?: Uint8Array;
}

export const MEMO_FORMAT = "ldpstream-device-memo";
export const MEMO_VERSION = 1;

interface MemoEntry {
  collection: string;
  memoization: string;
  answers: Record<string, Record<string, unknown>>;
  window: number | null;
  sent: number;
  secret?: string;
}

interface MemoDoc {
  format: string;
  version: number;
  collections: Record<string, MemoEntry>;
}

export class Device {
  readonly oracle: Oracle;
  private readonly instant: Rerandomizer | null;
  private readonly source: DrawSource;
  private readonly clock: () => number;
  private readonly memo = new Map<string, Report>();
  /** Start (epoch s) of the window of the last message built. */
  window: number | null = null;
  sentInWindow = 0;
  /** The secret that picks this device's phase of a protocol group (null until needed). */
  secret: Uint8Array | null;

  constructor(readonly spec: CollectionSpec, private readonly options: DeviceOptions = {}) {
    const { oracle, instant } = spec.channels();
    this.oracle = oracle;
    this.instant = instant;
    this.source = options.source ?? new CryptoSource();
    this.clock = options.clock ?? (() => Date.now() / 1000);
    this.secret = options.secret ?? null;
    if (options.storage) this.load();
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
   * the collection's group: then `message` sends nothing. */
  takesPart(): boolean {
    const p = this.spec.protocol;
    if (!p || !p.fractions) return true;
    if (this.secret === null) {
      const c = (globalThis as { crypto?: { getRandomValues(a: Uint8Array): Uint8Array } }).crypto;
      if (!c) throw new Error("crypto.getRandomValues is not available: the SDK needs a CSPRNG");
      this.secret = c.getRandomValues(new Uint8Array(16));
      this.save();
    }
    return PHASES[p.name][devicePhase(this.secret, p.group, p.fractions)] === p.phase;
  }

  /** The report of a value (a label / number; a set of them; an attribute tuple), per the
   * memoization policy. */
  report(value: Input): Report {
    const [idx, key] = this.input(value);
    if (this.spec.memoization === "none") return this.oracle.perturb(idx, this.source);
    let rep = this.memo.get(key);
    if (rep === undefined) {
      rep = this.oracle.perturb(idx, this.source);
      this.memo.set(key, rep);
      this.save();
    }
    return this.instant ? this.instant.rerandomize(rep, this.source) : rep;
  }

  /** Start (epoch s) of the collection window holding `now` (default: the clock). */
  currentWindow(now?: number): number {
    return this.spec.windowStart(now ?? this.clock());
  }

  /** True unless the cadence is used up in the current window. */
  canReport(now?: number): boolean {
    return this.window !== this.currentWindow(now) ||
      this.sentInWindow < this.spec.reportsPerWindow;
  }

  /** The binary message of one report, or null when the window's cadence is used up. */
  message(value: Input, now?: number): Uint8Array | null {
    const rep = this.next(value, now);
    return rep && encodeBinary(this.spec, this.oracle.columns, [rep]);
  }

  /** The JSON message text of one report, or null when the cadence is used up. */
  messageJson(value: Input, now?: number): string | null {
    const rep = this.next(value, now);
    return rep && encodeJson(this.spec, this.oracle.columns, [rep]);
  }

  private next(value: Input, now?: number): Report | null {
    const window = this.currentWindow(now);
    if (window === this.window && this.sentInWindow >= this.spec.reportsPerWindow) return null;
    if (!this.takesPart()) return null;
    const rep = this.report(value);
    this.sentInWindow = window === this.window ? this.sentInWindow + 1 : 1;
    this.window = window;
    this.save();
    return rep;
  }

  // ---- persistence ---------------------------------------------------------------------
  private get key(): string {
    return this.options.storageKey ?? MEMO_FORMAT;
  }

  private readDoc(): MemoDoc {
    const text = this.options.storage?.getItem(this.key);
    if (!text) return { format: MEMO_FORMAT, version: MEMO_VERSION, collections: {} };
    const doc = JSON.parse(text) as MemoDoc;
    if (doc.format !== MEMO_FORMAT || doc.version !== MEMO_VERSION || !doc.collections) {
      throw new Error(`storage key ${this.key} does not hold a ${MEMO_FORMAT} document`);
    }
    return doc;
  }

  private save(): void {
    const storage = this.options.storage;
    if (!storage) return;
    const doc = this.readDoc();
    const answers: MemoEntry["answers"] = {};
    const keys = Array.from(this.memo.keys())
      .sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0));
    for (const k of keys) {
      const rec: Record<string, unknown> = { mechanism: this.oracle.mechanism,
        fingerprint: this.spec.oracleFingerprint };
      const rep = this.memo.get(k) as Report;
      for (const c of this.oracle.columns) rec[c.name] = rep[c.name];
      answers[k] = rec;
    }
    const entry: MemoEntry = { collection: this.spec.id,
      memoization: this.spec.memoization, answers, window: this.window,
      sent: this.sentInWindow };
    if (this.secret !== null) entry.secret = toHex(this.secret);
    doc.collections[this.spec.fingerprint] = entry;
    storage.setItem(this.key, JSON.stringify(doc));
  }

  private load(): void {
    const entry = this.readDoc().collections[this.spec.fingerprint];
    if (!entry) return;
    const size = BigInt(this.spec.domainSize());
    for (const [k, rec] of Object.entries(entry.answers)) {
      const idx = BigInt(k);
      const fits = idx < 0n ? this.spec.setValued : idx < size;
      if (!fits || rec.fingerprint !== this.spec.oracleFingerprint) {
        throw new Error(`memo entry ${k} does not fit collection ${this.spec.id}`);
      }
      const rep: Report = {};
      for (const c of this.oracle.columns) rep[c.name] = rec[c.name] as number | number[];
      this.memo.set(k, rep);
    }
    this.window = entry.window;
    this.sentInWindow = entry.sent;
    if (this.secret === null && typeof entry.secret === "string") {
      this.secret = new Uint8Array(entry.secret.match(/../g)?.map((h) => parseInt(h, 16)) ?? []);
    }
  }
}
