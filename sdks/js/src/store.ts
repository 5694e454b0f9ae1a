/**
 * The device's private store: its secret, the reporting cadence and the outbox of queued
 * reports — one JSON document (docs/wire-format.md §6, "device store"), the same as the
 * Python and Java SDKs'. It never holds a true value or an answer: permanent answers are
 * derived from the secret. Keys it does not know are kept, so a newer SDK (or the app)
 * may add its own.
 *
 * Every change goes through `update(fn)`, which runs `fn` on the document atomically:
 * no other tab, worker, Device or process reads or writes in between.
 *
 * - browsers: IndexedDB (a readwrite transaction per update, atomic across tabs), else
 *   `localStorage` under the Web Locks API;
 * - Node: a file under the user data directory (src/file-store.ts);
 * - `MemoryStore`: nothing persists (an app that opts out; tests).
 */
import { StoreError } from "./errors.js";
import { randomBytes } from "./random.js";

export const STORE_FORMAT = "ldpstream-device-store";
export const STORE_VERSION = 1;
/** Default bound of the outbox: beyond it the oldest report is dropped (and counted). */
export const QUEUE_LIMIT = 1000;

/** A queued report: the perturbed message, kept until the gateway acknowledged it. */
export interface QueuedReport {
  /** Its Idempotency-Key, the same on every attempt, across restarts. */
  key: string;
  collection: string;
  fingerprint: string;
  /** Content type: application/octet-stream (binary) or application/json. */
  type: string;
  /** The message bytes, hex. */
  body: string;
  /** Start (epoch s) of the window it was made in. */
  window: number;
}

/** Cadence bookkeeping of one collection (keyed by its fingerprint). */
export interface Cadence {
  collection: string;
  window: number | null;
  sent: number;
}

/** The store document. */
export interface StoreDocument {
  format: string;
  version: number;
  secret?: string;
  collections: Record<string, Cadence>;
  outbox: QueuedReport[];
  dropped: number;
  refused: number;
  not_before: number | null;
  [other: string]: unknown;
}

/** Where a device keeps its state; `update` is atomic. */
export interface DeviceStore {
  /** Largest number of queued reports (oldest dropped first). */
  readonly queueLimit: number;
  /** Run `fn` on the document under the store's exclusive lock and save what it changed. */
  update<T>(fn: (doc: StoreDocument) => T): Promise<T>;
}

export function emptyDocument(): StoreDocument {
  return { format: STORE_FORMAT, version: STORE_VERSION, collections: {}, outbox: [],
    dropped: 0, refused: 0, not_before: null };
}

/** `doc` if it is a device store document (missing counters filled in), else StoreError. */
export function checkDocument(doc: unknown, where: string): StoreDocument {
  const d = doc as Partial<StoreDocument> | null;
  if (!d || typeof d !== "object" || d.format !== STORE_FORMAT || d.version !== STORE_VERSION) {
    if (d && typeof d === "object" && d.format === "ldpstream-device-memo") {
      throw new StoreError(`${where} is a memo of SDK 0.1 (it holds true values and randomly ` +
        "drawn answers): remove it; the device then derives its permanent answers from a new " +
        "secret");
    }
    throw new StoreError(`${where} is not a ${STORE_FORMAT} v${STORE_VERSION} document`);
  }
  const out = { ...emptyDocument(), ...d } as StoreDocument;
  if (typeof out.collections !== "object" || !Array.isArray(out.outbox)) {
    throw new StoreError(`${where}: 'collections' must be an object and 'outbox' a list`);
  }
  return out;
}

/** Parse stored text (null: nothing stored yet). */
export function parseDocument(text: string | null | undefined, where: string): StoreDocument {
  if (text === null || text === undefined || text === "") return emptyDocument();
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new StoreError(`${where} is not JSON: ${(e as Error).message}`);
  }
  return checkDocument(doc, where);
}

const hex = (b: Uint8Array): string => Array.from(b, (x) => x.toString(16).padStart(2, "0"))
  .join("");

/** The device secret of `doc`, drawn (32 CSPRNG bytes, or `make()`) if it has none. */
export function ensureSecret(doc: StoreDocument, make?: () => Uint8Array): string {
  if (typeof doc.secret !== "string") {
    const raw = make ? make() : randomBytes(32);
    if (raw.length < 16 || raw.length > 64) throw new RangeError("a secret must be 16 to 64 bytes");
    doc.secret = hex(raw);
  }
  if (!/^([0-9a-f]{2}){16,64}$/.test(doc.secret)) {
    throw new StoreError("the store's secret is not 16 to 64 bytes of lower-case hex");
  }
  return doc.secret;
}

/** Append a report to the outbox, dropping (and counting) the oldest beyond `limit`. */
export function pushReport(doc: StoreDocument, entry: QueuedReport, limit: number): void {
  doc.outbox.push(entry);
  while (doc.outbox.length > limit) {
    doc.outbox.shift();
    doc.dropped = (doc.dropped ?? 0) + 1;
  }
}

const clone = <T>(x: T): T => JSON.parse(JSON.stringify(x)) as T;

/** Runs updates one after another (a promise chain): the in-process half of a lock. */
export class Serial {
  private tail: Promise<unknown> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.tail.then(fn, fn);
    this.tail = next.catch(() => undefined);
    return next;
  }
}

/**
 * Keeps nothing across restarts: every new instance is a new device, with new permanent
 * answers. Only for apps that keep the secret elsewhere (`secret` option), tests and
 * simulations — averaging the answers of several starts reveals the true value.
 */
export class MemoryStore implements DeviceStore {
  private doc = emptyDocument();
  private readonly serial = new Serial();
  constructor(readonly queueLimit: number = QUEUE_LIMIT) {}

  update<T>(fn: (doc: StoreDocument) => T): Promise<T> {
    return this.serial.run(async () => {
      const work = clone(this.doc);
      const out = fn(work);
      this.doc = work;
      return out;
    });
  }
}

/** The part of the Web Storage API a WebStore uses (e.g. `localStorage`). */
export interface KeyValueStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

interface LockManager {
  request<T>(name: string, cb: () => Promise<T>): Promise<T>;
}

/** localStorage (or any KeyValueStorage) under the Web Locks API when the browser has it. */
export class KeyValueStore implements DeviceStore {
  private readonly serial = new Serial();
  constructor(private readonly storage: KeyValueStorage, readonly key = STORE_FORMAT,
              readonly queueLimit: number = QUEUE_LIMIT) {}

  update<T>(fn: (doc: StoreDocument) => T): Promise<T> {
    const body = async (): Promise<T> => {
      const text = this.storage.getItem(this.key);
      const doc = parseDocument(text, `storage key ${this.key}`);
      const out = fn(doc);
      const after = JSON.stringify(doc);
      if (after !== text) this.storage.setItem(this.key, after);
      return out;
    };
    const locks = (globalThis as { navigator?: { locks?: LockManager } }).navigator?.locks;
    return this.serial.run(() => (locks ? locks.request(`ldpstream:${this.key}`, body) : body()));
  }
}

interface IdbRequest<T> { result: T; error: unknown; onsuccess: (() => void) | null;
  onerror: (() => void) | null }
interface IdbTransaction { objectStore(n: string): { get(k: string): IdbRequest<unknown>;
  put(v: unknown, k: string): IdbRequest<unknown> }; oncomplete: (() => void) | null;
  onerror: (() => void) | null; onabort: (() => void) | null; error: unknown; abort(): void }
interface IdbDatabase { transaction(n: string, mode: string): IdbTransaction;
  objectStoreNames: { contains(n: string): boolean }; createObjectStore(n: string): unknown }
interface IdbFactory { open(name: string, version: number): IdbRequest<IdbDatabase> &
  { onupgradeneeded: (() => void) | null } }

/**
 * IndexedDB (browsers): the document under one key of one object store; each update is one
 * readwrite transaction, which the browser runs alone across every tab and worker of the
 * origin.
 */
export class IndexedDbStore implements DeviceStore {
  private db: Promise<IdbDatabase> | null = null;
  constructor(readonly dbName = "ldpstream", readonly queueLimit: number = QUEUE_LIMIT,
              private readonly factory?: IdbFactory) {}

  private open(): Promise<IdbDatabase> {
    if (!this.db) {
      const idb = this.factory ?? (globalThis as { indexedDB?: IdbFactory }).indexedDB;
      if (!idb) return Promise.reject(new StoreError("IndexedDB is not available here"));
      this.db = new Promise((resolve, reject) => {
        const req = idb.open(this.dbName, 1);
        req.onupgradeneeded = () => {
          if (!req.result.objectStoreNames.contains("store")) req.result.createObjectStore("store");
        };
        req.onsuccess = () => resolve(req.result);
        req.onerror = () => reject(new StoreError(`IndexedDB ${this.dbName}: ${String(req.error)}`));
      });
    }
    return this.db;
  }

  async update<T>(fn: (doc: StoreDocument) => T): Promise<T> {
    const db = await this.open();
    return new Promise<T>((resolve, reject) => {
      const tx = db.transaction("store", "readwrite");
      const os = tx.objectStore("store");
      let out: T;
      let failure: unknown = null;
      const get = os.get("device");
      get.onsuccess = () => {
        try {
          const before = get.result === undefined ? null : JSON.stringify(get.result);
          const doc = parseDocument(before, `IndexedDB ${this.dbName}`);
          out = fn(doc);
          if (JSON.stringify(doc) !== before) os.put(clone(doc), "device");
        } catch (e) {
          failure = e;
          tx.abort();
        }
      };
      tx.oncomplete = () => resolve(out);
      tx.onabort = tx.onerror = () => reject(failure ?? new StoreError(
        `IndexedDB ${this.dbName}: ${String(tx.error)}`));
    });
  }
}

let shared: Promise<DeviceStore> | null = null;

/**
 * The platform's private store, opened once per page / process: IndexedDB in browsers (else
 * localStorage), a file under the user data directory in Node (`FileStore`; the path of
 * `defaultStorePath()`, the one the Python SDK uses).
 */
export function defaultStore(): Promise<DeviceStore> {
  if (!shared) {
    const g = globalThis as { indexedDB?: unknown; localStorage?: KeyValueStorage;
      process?: { versions?: { node?: string } } };
    if (g.process?.versions?.node && !g.indexedDB) {
      shared = import("./file-store.js").then((m) => new m.FileStore());
    } else if (g.indexedDB) {
      shared = Promise.resolve(new IndexedDbStore());
    } else if (g.localStorage) {
      shared = Promise.resolve(new KeyValueStore(g.localStorage));
    } else {
      shared = Promise.reject(new StoreError("no private store on this platform: pass " +
        "{ store } (a MemoryStore opts out of persistence; see the README)"));
    }
  }
  return shared;
}
