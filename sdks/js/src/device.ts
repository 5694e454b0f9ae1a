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
import { Oracle, Report, Rerandomizer } from "./mechanisms.js";
import { CryptoSource, DrawSource } from "./random.js";
import { CollectionSpec } from "./spec.js";

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
}

export const MEMO_FORMAT = "ldpstream-device-memo";
export const MEMO_VERSION = 1;

interface MemoEntry {
  collection: string;
  memoization: string;
  answers: Record<string, Record<string, unknown>>;
  window: number | null;
  sent: number;
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

  constructor(readonly spec: CollectionSpec, private readonly options: DeviceOptions = {}) {
    const { oracle, instant } = spec.channels();
    this.oracle = oracle;
    this.instant = instant;
    this.source = options.source ?? new CryptoSource();
    this.clock = options.clock ?? (() => Date.now() / 1000);
    if (options.storage) this.load();
  }

  /** The report of a label / number of the domain, per the memoization policy. */
  report(value: string | number | bigint): Report {
    const idx = this.spec.index(value);
    if (this.spec.memoization === "none") return this.oracle.perturb(idx, this.source);
    const key = String(idx);
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
  message(value: string | number | bigint, now?: number): Uint8Array | null {
    const rep = this.next(value, now);
    return rep && encodeBinary(this.spec, this.oracle.columns, [rep]);
  }

  /** The JSON message text of one report, or null when the cadence is used up. */
  messageJson(value: string | number | bigint, now?: number): string | null {
    const rep = this.next(value, now);
    return rep && encodeJson(this.spec, this.oracle.columns, [rep]);
  }

  private next(value: string | number | bigint, now?: number): Report | null {
    const window = this.currentWindow(now);
    if (window === this.window && this.sentInWindow >= this.spec.reportsPerWindow) return null;
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
    const keys = Array.from(this.memo.keys()).sort((a, b) => Number(a) - Number(b));
    for (const k of keys) {
      const rec: Record<string, unknown> = { mechanism: this.oracle.mechanism,
        fingerprint: this.spec.oracleFingerprint };
      const rep = this.memo.get(k) as Report;
      for (const c of this.oracle.columns) rec[c.name] = rep[c.name];
      answers[k] = rec;
    }
    doc.collections[this.spec.fingerprint] = { collection: this.spec.id,
      memoization: this.spec.memoization, answers, window: this.window,
      sent: this.sentInWindow };
    storage.setItem(this.key, JSON.stringify(doc));
  }

  private load(): void {
    const entry = this.readDoc().collections[this.spec.fingerprint];
    if (!entry) return;
    const size = Number(this.spec.domainSize());
    for (const [k, rec] of Object.entries(entry.answers)) {
      const idx = Number(k);
      if (!(idx >= 0 && idx < size) || rec.fingerprint !== this.spec.oracleFingerprint) {
        throw new Error(`memo entry ${k} does not fit collection ${this.spec.id}`);
      }
      const rep: Report = {};
      for (const c of this.oracle.columns) rep[c.name] = rec[c.name] as number | number[];
      this.memo.set(k, rep);
    }
    this.window = entry.window;
    this.sentInWindow = entry.sent;
  }
}
