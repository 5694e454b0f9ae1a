/**
 * The collection spec model (docs/wire-format.md §1): parsed from the query API's JSON,
 * verified against its fingerprint, and the mapping of raw values to domain indices.
 */
import { Canon, PyFloat, fingerprintOf } from "./canonical.js";
import { checkEpsilon1, checkOracle } from "./checks.js";
import { SpecError } from "./errors.js";
import { Oracle, OracleSpec, Rerandomizer, Value, makeOracle, makeRerandomizer } from "./mechanisms.js";

export type ScalarDomain =
  | { kind: "categories"; labels: string[] }
  | { kind: "integers"; low: number | bigint; high: number | bigint }
  | { kind: "interval"; low: number; high: number; bins: number };

/** A multi collection's domain: named attributes, each a scalar domain. */
export type Domain = ScalarDomain
  | { kind: "attributes"; attributes: Array<ScalarDomain & { name: string }> };

/** A raw value: a label or number; for a set-valued collection a list of them; for a multi
 * collection a mapping attribute → value or a list in the attributes' order. */
export type Input = string | number | bigint | Array<string | number | bigint>
  | Record<string, string | number | bigint>;

/** The `protocol` key of a phase of a set-valued protocol (ldpcore.setvalued.phases). */
export interface ProtocolJson {
  name: string;
  group: string;
  phase: string;
  k: number;
  epsilon_total: number;
  fractions?: number[];
}

/** Phases of each protocol, in order. */
export const PHASES: Record<string, string[]> = {
  svim: ["candidates", "sizes", "frequencies"],
  svsm: ["candidates", "sizes", "frequencies", "itemset-sizes", "itemsets"],
  ldpminer: ["candidates", "frequencies"],
};

const SET_VALUED = ["ps", "psi", "setsize"];

export type Memoization = "none" | "permanent" | "two-level";

/** The JSON form the query API serves (`GET /v1/collections/{id}` → `spec`). */
export interface CollectionJson {
  id: string;
  description?: string;
  version?: number;
  oracle: OracleSpec;
  domain: Domain;
  window_seconds?: number;
  retention_seconds?: number;
  min_reports?: number;
  memoization?: Memoization;
  epsilon_1?: number;
  reports_per_window?: number;
  protocol?: ProtocolJson;
  fingerprint?: string;
}

const ORACLE_FLOATS = new Set(["epsilon", "low", "high", "b"]);
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** The oracle spec with its float keys (at any depth: multi's attributes and pairs) marked. */
function canonOracle(oracle: OracleSpec): Canon {
  const out: Record<string, Canon> = {};
  for (const [k, v] of Object.entries(oracle)) {
    out[k] = ORACLE_FLOATS.has(k) && typeof v === "number" ? new PyFloat(v) : canonNested(v);
  }
  return out;
}

function canonNested(v: unknown): Canon {
  if (Array.isArray(v)) return v.map(canonNested);
  if (v && typeof v === "object" && !(v instanceof PyFloat)) return canonOracle(v as OracleSpec);
  return v as Canon;
}

function canonDomain(d: Domain): Canon {
  if (d.kind === "categories") return { kind: d.kind, labels: d.labels };
  if (d.kind === "integers") return { kind: d.kind, low: d.low, high: d.high };
  if (d.kind === "attributes") {
    return { kind: d.kind, attributes: d.attributes.map((a) => {
      const c = canonDomain(a) as Record<string, Canon>;
      return { name: a.name, ...c };
    }) };
  }
  return { kind: d.kind, low: new PyFloat(d.low), high: new PyFloat(d.high), bins: d.bins };
}

function scalarSize(d: ScalarDomain): number | bigint {
  if (d.kind === "categories") return d.labels.length;
  if (d.kind === "integers") {
    const n = BigInt(d.high) - BigInt(d.low) + 1n;
    return n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
  }
  return d.bins;
}

/** The index of a label / number in a scalar domain (RangeError if outside). */
function scalarIndex(d: ScalarDomain, value: unknown): number | bigint {
  if (d.kind === "categories") {
    const i = typeof value === "string" ? d.labels.indexOf(value) : -1;
    if (i < 0) throw new RangeError(`value ${JSON.stringify(value)} is not one of the labels`);
    return i;
  }
  if (typeof value !== "number" && typeof value !== "bigint") {
    throw new RangeError("numeric domain: give a number");
  }
  if (d.kind === "integers") {
    if (typeof value === "number" && !Number.isInteger(value)) {
      throw new RangeError(`values must be integers in [${d.low}, ${d.high}]`);
    }
    const x = BigInt(value);
    if (x < BigInt(d.low) || x > BigInt(d.high)) {
      throw new RangeError(`values must be integers in [${d.low}, ${d.high}]`);
    }
    const i = x - BigInt(d.low);
    return i <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(i) : i;
  }
  const x = Number(value);
  if (!Number.isFinite(x)) throw new RangeError("values must be finite numbers");
  const width = (d.high - d.low) / d.bins;
  return Math.min(Math.max(Math.floor((x - d.low) / width), 0), d.bins - 1);
}

/** An immutable collection spec; construction verifies the served fingerprint. */
export class CollectionSpec {
  readonly id: string;
  readonly description: string;
  readonly version: number;
  readonly oracleSpec: OracleSpec;
  readonly domain: Domain;
  readonly windowSeconds: number;
  readonly retentionSeconds: number;
  readonly minReports: number;
  readonly memoization: Memoization;
  readonly epsilon1: number | null;
  readonly reportsPerWindow: number;
  /** The protocol of a phase collection (set-valued protocols), else null. */
  readonly protocol: ProtocolJson | null;
  /** SHA-256 prefix of the canonical spec (carried in every message envelope). */
  readonly fingerprint: string;
  /** SHA-256 prefix of the canonical oracle spec (carried in every batch). */
  readonly oracleFingerprint: string;

  constructor(raw: CollectionJson) {
    if (!raw || typeof raw !== "object") throw new SpecError("a collection must be an object");
    if (typeof raw.id !== "string" || !ID_RE.test(raw.id)) {
      throw new SpecError(`collection id must match ${ID_RE}, got ${JSON.stringify(raw.id)}`, "id");
    }
    if (!raw.oracle || typeof raw.oracle.mechanism !== "string") {
      throw new SpecError("oracle must be an object with a 'mechanism'", "oracle");
    }
    this.id = raw.id;
    this.description = raw.description ?? "";
    this.version = raw.version ?? 1;
    this.oracleSpec = { ...raw.oracle };
    this.domain = raw.domain;
    this.windowSeconds = raw.window_seconds ?? 3600;
    this.retentionSeconds = raw.retention_seconds ?? 30 * 86400;
    this.minReports = raw.min_reports ?? 100;
    this.memoization = raw.memoization ?? "permanent";
    this.epsilon1 = raw.epsilon_1 ?? null;
    this.reportsPerWindow = raw.reports_per_window ?? 1;
    this.protocol = raw.protocol ?? null;
    if (!["none", "permanent", "two-level"].includes(this.memoization)) {
      throw new SpecError(`memoization must be none, permanent or two-level, got ${this.memoization}`,
        "memoization");
    }
    if ((this.memoization === "two-level") !== (this.epsilon1 !== null)) {
      throw new SpecError("epsilon_1 is needed with, and only with, memoization 'two-level'",
        "epsilon_1");
    }
    if (!Number.isSafeInteger(this.reportsPerWindow) || this.reportsPerWindow < 1) {
      throw new SpecError(`reports_per_window must be an integer >= 1, got ${this.reportsPerWindow}`,
        "reports_per_window");
    }
    // The ranges ldpcore accepts, before anything is derived from the spec.
    checkOracle(this.oracleSpec);
    if (this.epsilon1 !== null) checkEpsilon1(this.epsilon1);
    if (!Number.isSafeInteger(this.windowSeconds) || this.windowSeconds < 1) {
      throw new SpecError(`window_seconds must be an integer >= 1, got ${this.windowSeconds}`,
        "window_seconds");
    }
    this.fingerprint = fingerprintOf(this.canonical());
    this.oracleFingerprint = fingerprintOf(canonOracle(this.oracleSpec));
    if (raw.fingerprint !== undefined && raw.fingerprint !== this.fingerprint) {
      throw new SpecError(`fingerprint ${raw.fingerprint} does not match the spec's ` +
                      `${this.fingerprint} (a different ldpstream version or an altered spec)`,
                      "fingerprint");
    }
    const have = BigInt(this.domainSize());
    const capped = this.domain.kind === "attributes" && have > 1n << 62n ? 1n << 62n : have;
    const want = this.expectedOracleSize();
    if (this.domain.kind === "attributes" ? Number(capped) !== Number(want)
      : have !== BigInt(want)) {
      throw new SpecError(`oracle.domain_size does not match the domain's ${this.domainSize()} ` +
        "values", "oracle.domain_size");
    }
  }

  /** Parse the query API's answer (`{"spec": {...}}`) or a bare spec object. */
  static fromJson(raw: unknown): CollectionSpec {
    const obj = raw as { spec?: CollectionJson } & CollectionJson;
    return new CollectionSpec(obj && typeof obj === "object" && obj.spec ? obj.spec : obj);
  }

  /** The canonical object whose hash is the fingerprint (ldpcore's `to_dict`). */
  canonical(): Canon {
    const out: Record<string, Canon> = {
      id: this.id, description: this.description, version: this.version,
      oracle: canonOracle(this.oracleSpec), domain: canonDomain(this.domain),
      window_seconds: this.windowSeconds, retention_seconds: this.retentionSeconds,
      min_reports: this.minReports,
    };
    if (this.memoization !== "permanent") out.memoization = this.memoization;
    if (this.epsilon1 !== null) out.epsilon_1 = new PyFloat(this.epsilon1);
    if (this.reportsPerWindow !== 1) out.reports_per_window = this.reportsPerWindow;
    if (this.protocol !== null) {
      const p: Record<string, Canon> = { ...(this.protocol as unknown as Record<string, Canon>),
        epsilon_total: new PyFloat(this.protocol.epsilon_total) };
      if (this.protocol.fractions) p.fractions = this.protocol.fractions.map((f) => new PyFloat(f));
      out.protocol = p;
    }
    return out;
  }

  private expectedOracleSize(): number | bigint {
    const o = this.oracleSpec;
    if (o.mechanism === "pem") return 2n ** BigInt(o.bits as number);
    return o.domain_size as number;
  }

  /** Number of values of the domain (a bigint beyond 2^53). */
  domainSize(): number | bigint {
    const d = this.domain;
    if (d.kind !== "attributes") return scalarSize(d);
    const n = d.attributes.reduce((p, a) => p * BigInt(scalarSize(a)), 1n);
    return n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
  }

  /** True for the set-valued mechanisms (ps, psi, setsize): a value is a set of labels. */
  get setValued(): boolean {
    return SET_VALUED.includes(this.oracleSpec.mechanism as string);
  }

  /** The domain index of a label / number (throws RangeError if outside the domain). */
  index(value: string | number | bigint): Value {
    const d = this.domain;
    if (d.kind === "attributes") throw new RangeError("a multi collection: use attributeIndices");
    return scalarIndex(d, value);
  }

  /** A set of labels / numbers → its sorted distinct item indices (set-valued collections). */
  indexSet(values: Iterable<string | number | bigint>): number[] {
    if (typeof values === "string" || !values || typeof values[Symbol.iterator] !== "function") {
      throw new RangeError("a set-valued collection takes a list of labels / numbers");
    }
    const idx = Array.from(values, (v) => Number(this.index(v)));
    return Array.from(new Set(idx)).sort((a, b) => a - b);
  }

  /** One device's tuple (mapping name → value, or a list in order) → one index per
   * attribute (multi collections). */
  attributeIndices(value: Input): number[] {
    const d = this.domain;
    if (d.kind !== "attributes") throw new RangeError("not a multi collection");
    const names = d.attributes.map((a) => a.name);
    let items: unknown[];
    if (Array.isArray(value)) {
      items = value;
    } else if (value && typeof value === "object") {
      const rec = value as Record<string, unknown>;
      const keys = Object.keys(rec);
      if (keys.length !== names.length || !names.every((n) => n in rec)) {
        throw new RangeError(`a value needs exactly the attributes ${names.join(", ")}`);
      }
      items = names.map((n) => rec[n]);
    } else {
      throw new RangeError(`a value must be a mapping {${names.join(", ")}} or a list`);
    }
    if (items.length !== names.length) {
      throw new RangeError(`a value needs ${names.length} values, one per attribute`);
    }
    return d.attributes.map((a, j) => {
      try {
        return Number(scalarIndex(a, items[j]));
      } catch (e) {
        throw new RangeError(`attribute ${a.name}: ${(e as Error).message}`);
      }
    });
  }

  /** The mixed-radix index of per-attribute indices (attribute 0 most significant). */
  combine(row: number[]): bigint {
    const d = this.domain;
    if (d.kind !== "attributes") throw new RangeError("not a multi collection");
    return d.attributes.reduce((acc, a, j) => acc * BigInt(scalarSize(a)) + BigInt(row[j]), 0n);
  }

  /** A fresh oracle (perturbation and report layout) for this collection.
   * @internal */
  oracle(): Oracle {
    return makeOracle(this.oracleSpec);
  }

  /** The oracle and, for two-level memoization, its instantaneous channel.
   * @internal */
  channels(): { oracle: Oracle; instant: Rerandomizer | null } {
    const oracle = this.oracle();
    const instant = this.memoization === "two-level" && this.epsilon1 !== null
      ? makeRerandomizer(oracle, this.epsilon1) : null;
    return { oracle, instant };
  }

  /** Start (epoch seconds) of the tumbling window holding `nowSeconds`. */
  windowStart(nowSeconds: number): number {
    const ms = Math.trunc(nowSeconds * 1000);
    return Math.floor(Math.floor(ms / 1000) / this.windowSeconds) * this.windowSeconds;
  }
}

/** GET `{apiUrl}/v1/collections/{id}` and verify the spec against its fingerprint. */
export async function fetchSpec(apiUrl: string, collection: string,
                                init?: { fetch?: typeof fetch; headers?: Record<string, string> }
): Promise<CollectionSpec> {
  const f = init?.fetch ?? globalThis.fetch;
  const url = `${apiUrl.replace(/\/+$/, "")}/v1/collections/${encodeURIComponent(collection)}`;
  const resp = await f(url, { headers: { accept: "application/json", ...init?.headers } });
  if (!resp.ok) throw new Error(`GET ${url}: HTTP ${resp.status}`);
  // a spec outside ldpcore's ranges or with a wrong fingerprint throws SpecError
  return CollectionSpec.fromJson(await resp.json());
}
