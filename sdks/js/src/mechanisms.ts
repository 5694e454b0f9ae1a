/**
 * Every mechanism a collection can declare: report layout and reference perturbation
 * (docs/wire-format.md §3–4), built from the resolved oracle spec a collection serves.
 */
import { checkProbability } from "./checks.js";
import { DrawSource, below, bernoulli, uniform } from "./random.js";

export type Dtype = "uint8" | "uint16" | "uint32";

/** One report column: a scalar, or a bitmask of `bits` bits when bits > 0. */
export interface Column {
  name: string;
  dtype: Dtype;
  bits: number;
}

/** One report: column name → integer, or for a bitmask the ascending set-bit indices. */
export type Report = Record<string, number | number[]>;

/**
 * A value of the domain: an index (number), or for pem an integer up to 2^62 (bigint); for
 * the set-valued mechanisms (ps, psi, setsize) a set of item indices, for multi one index
 * per attribute (an array of numbers).
 */
export type Value = number | bigint | readonly number[];

export interface Oracle {
  readonly mechanism: string;
  readonly domainSize: number;
  readonly columns: Column[];
  perturb(v: Value, src: DrawSource): Report;
}

/** The instantaneous channel of two-level memoization. */
export interface Rerandomizer {
  rerandomize(permanent: Report, src: DrawSource): Report;
}

export type OracleSpec = Record<string, unknown>;

const u16or32 = (n: number): Dtype => (n <= 65536 ? "uint16" : "uint32");
const MAX_STATE_CELLS_LH = 1 << 24;

function num(spec: OracleSpec, key: string): number {
  const v = spec[key];
  if (typeof v !== "number" || !Number.isFinite(v)) {
    throw new Error(`oracle.${key} must be a number, got ${JSON.stringify(v)}`);
  }
  return v;
}

function intOf(spec: OracleSpec, key: string): number {
  const v = num(spec, key);
  if (!Number.isSafeInteger(v)) throw new Error(`oracle.${key} must be an integer, got ${v}`);
  return v;
}

function parity(x: number): number {
  let p = 0;
  while (x) {
    p ^= 1;
    x &= x - 1;
  }
  return p;
}

/** parity(popcount(a & b)) for non-negative integers below 2^53. */
function andParity(a: number, b: number): number {
  const lo = (a % 4294967296) & (b % 4294967296);
  const hi = Math.floor(a / 4294967296) & Math.floor(b / 4294967296);
  return parity(lo >>> 0) ^ parity(hi >>> 0);
}

export function nextPow2(x: number): number {
  let p = 1;
  while (p < x) p *= 2;
  return p;
}

export function isPrime(x: number): boolean {
  if (x < 2) return false;
  if (x % 2 === 0) return x === 2;
  for (let f = 3; f * f <= x; f += 2) if (x % f === 0) return false;
  return true;
}

/** The prime nearest x (the smaller on a tie), at least 2. */
export function nearestPrime(x: number): number {
  let lo = Math.max(2, Math.floor(x));
  while (!isPrime(lo) && lo > 2) lo--;
  let hi = Math.max(2, Math.ceil(x));
  while (!isPrime(hi)) hi++;
  return x - lo <= hi - x ? lo : hi;
}

function digitsNeeded(g: number, d: number): number {
  let r = 1;
  while (g ** r < d) r++;
  return r;
}

function grrLike(src: DrawSource, v: number, k: number, p: number): number {
  if (bernoulli(src, p)) return v;
  return (v + 1 + below(src, k - 1)) % k;
}

class GRR implements Oracle, Rerandomizer {
  readonly mechanism = "grr";
  readonly columns: Column[];
  readonly p: number;
  p1 = 0;
  constructor(eps: number, readonly domainSize: number) {
    const e = Math.exp(eps);
    this.p = e / (e + domainSize - 1);
    this.columns = [{ name: "y", dtype: u16or32(domainSize), bits: 0 }];
  }
  perturb(v: Value, src: DrawSource): Report {
    return { y: grrLike(src, Number(v), this.domainSize, this.p) };
  }
  setInstant(eps1: number): void {
    const e1 = Math.exp(eps1);
    this.p1 = e1 / (e1 + this.domainSize - 1);
  }
  rerandomize(z: Report, src: DrawSource): Report {
    return { y: grrLike(src, z.y as number, this.domainSize, this.p1) };
  }
}

class Unary implements Oracle, Rerandomizer {
  readonly columns: Column[];
  p: number;
  q: number;
  p1 = 0;
  q1 = 0;
  constructor(readonly mechanism: "sue" | "oue", eps: number, readonly domainSize: number) {
    [this.p, this.q] = Unary.probs(mechanism, eps);
    this.columns = [{ name: "bits", dtype: "uint8", bits: domainSize }];
  }
  static probs(mech: string, eps: number): [number, number] {
    if (mech === "sue") {
      const h = Math.exp(eps / 2);
      return [h / (h + 1), 1 / (h + 1)];
    }
    return [0.5, 1 / (Math.exp(eps) + 1)];
  }
  perturb(v: Value, src: DrawSource): Report {
    const x = Number(v);
    const bits: number[] = [];
    for (let i = 0; i < this.domainSize; i++) {
      if (bernoulli(src, i === x ? this.p : this.q)) bits.push(i);
    }
    return { bits };
  }
  setInstant(eps1: number): void {
    [this.p1, this.q1] = Unary.probs(this.mechanism, eps1);
  }
  rerandomize(z: Report, src: DrawSource): Report {
    const set = new Set(z.bits as number[]);
    const bits: number[] = [];
    for (let i = 0; i < this.domainSize; i++) {
      if (uniform(src) < (set.has(i) ? this.p1 : this.q1)) bits.push(i);
    }
    return { bits };
  }
}

class LocalHashing implements Oracle, Rerandomizer {
  readonly columns: Column[];
  readonly r: number;
  readonly nHashes: number;
  readonly p: number;
  p1 = 0;
  constructor(readonly mechanism: "blh" | "olh", eps: number, readonly domainSize: number,
              readonly g: number) {
    this.r = digitsNeeded(g, domainSize);
    this.nHashes = g ** this.r;
    const e = Math.exp(eps);
    this.p = e / (e + g - 1);
    this.columns = [{ name: "a", dtype: u16or32(this.nHashes), bits: 0 },
      { name: "t", dtype: g <= 256 ? "uint8" : "uint16", bits: 0 }];
  }
  static defaultG(eps: number, d: number): number {
    let g = nearestPrime(Math.exp(eps) + 1);
    while (g > 2 && g ** (digitsNeeded(g, d) + 1) > MAX_STATE_CELLS_LH) g = nearestPrime(g / 2);
    return g;
  }
  hash(a: number, x: number): number {
    const g = this.g;
    let acc = 0;
    for (let j = 0; j < this.r; j++) {
      acc += (a % g) * (x % g);
      a = Math.floor(a / g);
      x = Math.floor(x / g);
    }
    return acc % g;
  }
  perturb(v: Value, src: DrawSource): Report {
    const a = below(src, this.nHashes);
    return { a, t: grrLike(src, this.hash(a, Number(v)), this.g, this.p) };
  }
  setInstant(eps1: number): void {
    const e1 = Math.exp(eps1);
    this.p1 = e1 / (e1 + this.g - 1);
  }
  rerandomize(z: Report, src: DrawSource): Report {
    return { a: z.a, t: grrLike(src, z.t as number, this.g, this.p1) };
  }
}

class HR implements Oracle {
  readonly mechanism = "hr";
  readonly columns: Column[];
  readonly K: number;
  readonly p: number;
  constructor(eps: number, readonly domainSize: number) {
    this.K = nextPow2(domainSize + 1);
    const e = Math.exp(eps);
    this.p = e / (e + 1);
    this.columns = [{ name: "y", dtype: u16or32(this.K), bits: 0 }];
  }
  perturb(v: Value, src: DrawSource): Report {
    const row = Number(v) + 1;
    const z = below(src, this.K);
    const want = bernoulli(src, this.p);
    const inside = andParity(row, z) === 0;
    const low = row & -row;
    return { y: inside === want ? z : z ^ low };
  }
}

class HRR implements Oracle, Rerandomizer {
  readonly mechanism = "hrr";
  readonly columns: Column[];
  readonly D: number;
  readonly p: number;
  p1 = 0;
  constructor(eps: number, readonly domainSize: number) {
    this.D = nextPow2(domainSize);
    const e = Math.exp(eps);
    this.p = e / (e + 1);
    this.columns = [{ name: "j", dtype: u16or32(this.D), bits: 0 },
      { name: "b", dtype: "uint8", bits: 0 }];
  }
  perturb(v: Value, src: DrawSource): Report {
    const j = below(src, this.D);
    const flip = !bernoulli(src, this.p);
    return { j, b: andParity(j, Number(v)) ^ (flip ? 1 : 0) };
  }
  setInstant(eps1: number): void {
    const e1 = Math.exp(eps1);
    this.p1 = e1 / (e1 + 1);
  }
  rerandomize(z: Report, src: DrawSource): Report {
    return { j: z.j, b: (z.b as number) ^ (uniform(src) >= this.p1 ? 1 : 0) };
  }
}

class SS implements Oracle {
  readonly mechanism = "ss";
  readonly columns: Column[];
  readonly p: number;
  constructor(eps: number, readonly domainSize: number, readonly k: number) {
    const e = Math.exp(eps);
    this.p = k * e / (k * e + domainSize - k);
    this.columns = [{ name: "bits", dtype: "uint8", bits: domainSize }];
  }
  perturb(v: Value, src: DrawSource): Report {
    const x = Number(v);
    const chosen = new Set<number>();
    if (bernoulli(src, this.p)) chosen.add(x);
    while (chosen.size < this.k) {
      let u = below(src, this.domainSize - 1);
      if (u >= x) u += 1;
      chosen.add(u);
    }
    return { bits: Array.from(chosen).sort((a, b) => a - b) };
  }
}

/** The smallest primitive polynomial of degree b over GF(2) (ldpcore/_field.py). */
function primitivePoly(b: number): number {
  const q = 1 << b;
  for (let poly = q | 1; poly < 2 * q; poly += 2) {
    let x = 1, seen = 0;
    for (let i = 0; i < q - 1; i++) {
      x <<= 1;
      if (x & q) x ^= poly;
      seen++;
      if (x === 1) break;
    }
    if (x === 1 && seen === q - 1) return poly;
  }
  throw new Error(`no primitive polynomial of degree ${b}`);
}

class Sketch implements Oracle {
  readonly columns: Column[];
  readonly r: number;
  readonly k: number;
  readonly poly: number;
  readonly flip: number = 0;
  readonly keep: number = 0;
  constructor(readonly mechanism: "cms" | "hcms", eps: number, readonly domainSize: number,
              readonly m: number) {
    let r = 1;
    while (m ** r < domainSize) r++;
    this.r = r;
    this.k = (m ** r - 1) / (m - 1);
    this.poly = m > 2 && (m & (m - 1)) === 0 ? primitivePoly(Math.log2(m)) : 0;
    const jcol: Column = { name: "j", dtype: u16or32(this.k), bits: 0 };
    if (mechanism === "cms") {
      const h = Math.exp(eps / 2);
      this.flip = 1 / (h + 1);
      this.columns = [jcol, { name: "bits", dtype: "uint8", bits: m }];
    } else {
      const e = Math.exp(eps);
      this.keep = e / (e + 1);
      this.columns = [jcol, { name: "l", dtype: u16or32(m), bits: 0 },
        { name: "b", dtype: "uint8", bits: 0 }];
    }
  }
  private mul(a: number, b: number): number {
    if (this.poly === 0) return (a * b) % this.m;
    let out = 0;
    while (b) {
      if (b & 1) out ^= a;
      b >>= 1;
      a <<= 1;
      if (a & this.m) a ^= this.poly;
    }
    return out;
  }
  /** h_j(x) over GF(m) with row j's point of PG(r-1, m). */
  hash(j: number, x: number): number {
    const { m, r } = this;
    const pt = new Array<number>(r).fill(0);
    for (let lead = 0; lead < r; lead++) {
      const tail = r - lead - 1;
      const size = m ** tail;
      if (j < size) {
        pt[lead] = 1;
        for (let t = 0; t < tail; t++) pt[lead + 1 + t] = Math.floor(j / m ** (tail - 1 - t)) % m;
        break;
      }
      j -= size;
    }
    let acc = 0;
    for (let i = 0; i < r; i++) {
      const p = this.mul(pt[i], Math.floor(x / m ** i) % m);
      acc = this.poly ? acc ^ p : (acc + p) % m;
    }
    return acc;
  }
  perturb(v: Value, src: DrawSource): Report {
    const j = below(src, this.k);
    const hot = this.hash(j, Number(v));
    if (this.mechanism === "cms") {
      const bits: number[] = [];
      for (let i = 0; i < this.m; i++) {
        const w = uniform(src);
        if (i === hot ? w >= this.flip : w < this.flip) bits.push(i);
      }
      return { j, bits };
    }
    const l = below(src, this.m);
    const flip = !bernoulli(src, this.keep);
    return { j, l, b: andParity(l, hot) ^ (flip ? 1 : 0) };
  }
}

class HH implements Oracle {
  readonly mechanism = "hh";
  readonly columns: Column[];
  readonly height: number;
  readonly levels: Oracle[];
  constructor(eps: number, readonly domainSize: number, readonly fanout: number, base: string) {
    let h = 1;
    while (fanout ** h < domainSize) h++;
    this.height = h;
    this.levels = [];
    for (let lv = 1; lv <= h; lv++) {
      this.levels.push(makeOracle({ mechanism: base, epsilon: eps, domain_size: fanout ** lv }));
    }
    this.columns = [{ name: "level", dtype: "uint8", bits: 0 }, ...this.levels[h - 1].columns];
  }
  perturb(v: Value, src: DrawSource): Report {
    const level = 1 + below(src, this.height);
    const node = Math.floor(Number(v) / this.fanout ** (this.height - level));
    return { level, ...this.levels[level - 1].perturb(node, src) };
  }
}

class Haar implements Oracle {
  readonly mechanism = "haar";
  readonly columns: Column[];
  readonly padded: number;
  readonly height: number;
  readonly p: number;
  constructor(eps: number, readonly domainSize: number) {
    this.padded = nextPow2(domainSize);
    this.height = Math.round(Math.log2(this.padded));
    const e = Math.exp(eps);
    this.p = e / (e + 1);
    const top = Math.max(1, this.padded / 2);
    this.columns = [{ name: "level", dtype: "uint8", bits: 0 },
      { name: "j", dtype: u16or32(top), bits: 0 }, { name: "b", dtype: "uint8", bits: 0 }];
  }
  perturb(v: Value, src: DrawSource): Report {
    const x = Number(v);
    const level = 1 + below(src, this.height);
    const j = below(src, Math.floor(this.padded / 2 ** level));
    const node = Math.floor(x / 2 ** level);
    const right = Math.floor(x / 2 ** (level - 1)) % 2;
    const negative = andParity(j, node) ^ right;
    return { level, j, b: negative ^ (bernoulli(src, this.p) ? 0 : 1) };
  }
}

class SW implements Oracle {
  readonly mechanism = "sw";
  readonly columns: Column[] = [{ name: "y", dtype: "uint16", bits: 0 }];
  readonly p: number;
  constructor(eps: number, readonly domainSize: number, readonly b: number,
              readonly outBins: number) {
    const e = Math.exp(eps);
    this.p = e / (2 * b * e + 1);
  }
  perturb(v: Value, src: DrawSource): Report {
    const b = this.b;
    const u = (Number(v) + uniform(src)) / this.domainSize;
    const near = bernoulli(src, 2 * b * this.p);
    const t = uniform(src);
    const y = near ? u - b + 2 * b * t : (t < u ? -b + t : b + t);
    const idx = Math.floor((y + b) / (1 + 2 * b) * this.outBins);
    return { y: Math.min(Math.max(idx, 0), this.outBins - 1) };
  }
}

class PM implements Oracle {
  readonly mechanism = "pm";
  readonly columns: Column[] = [{ name: "y", dtype: "uint32", bits: 0 }];
  readonly C: number;
  readonly pBand: number;
  constructor(eps: number, readonly domainSize: number) {
    const h = Math.exp(eps / 2);
    this.C = (h + 1) / (h - 1);
    this.pBand = h / (h + 1);
  }
  perturb(v: Value, src: DrawSource): Report {
    return this.perturbT(2 * ((Number(v) + uniform(src)) / this.domainSize) - 1, src);
  }
  /** PM on t in [-1, 1]. */
  perturbT(t: number, src: DrawSource): Report {
    const c = this.C;
    const left = (c + 1) / 2 * t - (c - 1) / 2;
    const right = left + c - 1;
    const band = bernoulli(src, this.pBand);
    const s = uniform(src);
    let y: number;
    if (band) {
      y = left + s * (c - 1);
    } else {
      const rest = s * (c + 1);
      y = rest < left + c ? -c + rest : right + (rest - (left + c));
    }
    const z = (y + c) / (2 * c) * 65536;
    const zi = Math.floor(z + uniform(src));
    return { y: Math.min(Math.max(zi, 0), 65536) };
  }
}

class Duchi implements Oracle {
  readonly mechanism = "duchi";
  readonly columns: Column[] = [{ name: "y", dtype: "uint8", bits: 0 }];
  readonly e: number;
  constructor(eps: number, readonly domainSize: number) {
    this.e = Math.exp(eps);
  }
  perturb(v: Value, src: DrawSource): Report {
    return this.perturbT(2 * ((Number(v) + uniform(src)) / this.domainSize) - 1, src);
  }
  /** Duchi on t in [-1, 1]. */
  perturbT(t: number, src: DrawSource): Report {
    const e = this.e;
    return { y: bernoulli(src, ((e - 1) * t + e + 1) / (2 * (e + 1))) ? 1 : 0 };
  }
}

const M64 = (1n << 64n) - 1n;
const M128 = (1n << 128n) - 1n;
const PCG_MULT = 0x2360ED051FC65DA44385DF649FCCF645n;

/** numpy's SeedSequence(seed).generate_state(n, uint32). */
function seedSequence(seed: bigint, n: number): number[] {
  const entropy: number[] = [];
  let s = seed;
  do {
    entropy.push(Number(s & 0xffffffffn));
    s >>= 32n;
  } while (s > 0n);
  let hashConst = 0x43b0d7e5;
  const hashmix = (value: number): number => {
    value = (value ^ hashConst) >>> 0;
    hashConst = Math.imul(hashConst, 0x931e8875) >>> 0;
    value = Math.imul(value, hashConst) >>> 0;
    return (value ^ (value >>> 16)) >>> 0;
  };
  const mix = (x: number, y: number): number => {
    const r = (Math.imul(0xca01f9dd, x) - Math.imul(0x4973f715, y)) >>> 0;
    return (r ^ (r >>> 16)) >>> 0;
  };
  const pool = [0, 1, 2, 3].map((i) => hashmix(i < entropy.length ? entropy[i] : 0));
  for (let a = 0; a < 4; a++) {
    for (let b = 0; b < 4; b++) if (a !== b) pool[b] = mix(pool[b], hashmix(pool[a]));
  }
  for (let a = 4; a < entropy.length; a++) {
    for (let b = 0; b < 4; b++) pool[b] = mix(pool[b], hashmix(entropy[a]));
  }
  let hc = 0x8b51f9dd;
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    let v = (pool[i % 4] ^ hc) >>> 0;
    hc = Math.imul(hc, 0x58f38ded) >>> 0;
    v = Math.imul(v, hc) >>> 0;
    out.push((v ^ (v >>> 16)) >>> 0);
  }
  return out;
}

/** The first `count` outputs of numpy.random.default_rng(seed) (PCG64 XSL-RR 128/64). */
export function pcg64Words(seed: bigint, count: number): bigint[] {
  const w = seedSequence(seed, 8).map(BigInt);
  const v = [0, 1, 2, 3].map((i) => w[2 * i] | (w[2 * i + 1] << 32n));
  const initState = (v[0] << 64n) | v[1];
  const inc = (((v[2] << 64n) | v[3]) << 1n | 1n) & M128;
  let state = inc;
  state = (state + initState) & M128;
  state = (state * PCG_MULT + inc) & M128;
  const out: bigint[] = [];
  for (let i = 0; i < count; i++) {
    state = (state * PCG_MULT + inc) & M128;
    const hi = state >> 64n, lo = state & M64;
    const x = hi ^ lo, rot = hi >> 58n;
    out.push(((x >> rot) | (x << ((64n - rot) & 63n))) & M64);
  }
  return out;
}

/** PEM's prefix schedule (ldpcore.heavy.pem.pem_schedule). */
export function pemSchedule(bits: number, keep: number, eta: number): number[] {
  let log2keep = 0;
  while (2 ** log2keep < keep) log2keep++;
  const s0 = Math.min(bits, eta + log2keep);
  if (s0 === bits) return [bits];
  const steps = Math.ceil((bits - s0) / eta);
  const inc = Math.ceil((bits - s0) / steps);
  const lengths = new Set<number>();
  for (let i = 0; i < steps; i++) lengths.add(s0 + i * inc);
  lengths.add(bits);
  return Array.from(lengths).sort((a, b) => a - b);
}

class PEM implements Oracle {
  readonly mechanism = "pem";
  readonly columns: Column[] = [{ name: "group", dtype: "uint8", bits: 0 },
    { name: "seed", dtype: "uint16", bits: 0 }, { name: "y", dtype: "uint16", bits: 0 }];
  readonly lengths: number[];
  readonly g: number;
  readonly p: number;
  readonly domainSize: number;
  private mult: bigint[] = [];
  private off: bigint[] = [];
  constructor(eps: number, readonly bits: number, keep: number, eta: number,
              readonly pool: number, readonly hashSeed: bigint) {
    this.domainSize = 2 ** bits;
    this.lengths = pemSchedule(bits, keep, eta);
    const e = Math.exp(eps);
    const groups = this.lengths.length;
    const gCap = Math.max(2, Math.min(1 << 16, Math.floor((1 << 26) / (groups * pool))));
    this.g = Math.min(gCap, Math.max(2, roundHalfEven(e + 1)));
    this.p = e / (e + this.g - 1);
  }
  private ensurePool(): void {
    if (this.mult.length) return;
    const n = this.lengths.length * this.pool;
    const words = pcg64Words(this.hashSeed, 2 * n);
    this.mult = words.slice(0, n).map((w) => (w >> 1n) * 2n + 1n);
    this.off = words.slice(n).map((w) => w >> 1n);
  }
  perturb(v: Value, src: DrawSource): Report {
    this.ensurePool();
    const x = BigInt(v as number | bigint);
    if (x < 0n || x >= 1n << BigInt(this.bits)) {
      throw new RangeError(`pem values must be integers in [0, 2^${this.bits})`);
    }
    const group = below(src, this.lengths.length);
    const seed = below(src, this.pool);
    const prefix = x >> BigInt(this.bits - this.lengths[group]);
    const i = group * this.pool + seed;
    const mixed = (this.mult[i] * prefix + this.off[i]) & M64;
    const h = Number(((mixed >> 32n) * BigInt(this.g)) >> 32n);
    return { group, seed, y: grrLike(src, h, this.g, this.p) };
  }
}

function roundHalfEven(x: number): number {
  const f = Math.floor(x);
  const d = x - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

// ---- set-valued mechanisms (docs/wire-format.md §4, "Set-valued mechanisms") ----------

/** Sorted distinct item indices of a set (a number is a singleton). */
export function itemsOf(v: Value): number[] {
  const xs = typeof v === "number" || typeof v === "bigint" ? [Number(v)] : Array.from(v);
  return Array.from(new Set(xs)).sort((a, b) => a - b);
}

function intList(x: unknown, what: string): number[] {
  if (!Array.isArray(x) || !x.every((i) => Number.isSafeInteger(i))) {
    throw new Error(`oracle.${what} must be a list of integers`);
  }
  return x as number[];
}

/** The entries a set contributes, ascending (itemset positions, candidate positions, items). */
function setEntries(items: number[], candidates: number[] | null,
                    itemsets: number[][] | null): number[] {
  if (itemsets) {
    const have = new Set(items);
    const out: number[] = [];
    itemsets.forEach((its, j) => { if (its.every((x) => have.has(x))) out.push(j); });
    return out;
  }
  if (candidates) {
    const pos = new Map(candidates.map((c, i) => [c, i] as [number, number]));
    return items.filter((x) => pos.has(x)).map((x) => pos.get(x) as number).sort((a, b) => a - b);
  }
  return items;
}

/** ps / psi: pad the entries to `length`, sample one, report it with GRR at the amplified
 * epsilon' = log(l * expm1(eps) + 1) or OLH at eps, over m entries + l dummies. */
class Padded implements Oracle {
  readonly columns: Column[];
  readonly inner: Oracle;
  readonly length: number;
  readonly entries: number;
  readonly candidates: number[] | null;
  readonly itemsets: number[][] | null;
  constructor(readonly mechanism: "ps" | "psi", eps: number, readonly domainSize: number,
              spec: OracleSpec) {
    this.length = spec.length === undefined ? 1 : intOf(spec, "length");
    this.candidates = mechanism === "ps" && spec.candidates !== undefined
      ? intList(spec.candidates, "candidates") : null;
    this.itemsets = mechanism === "psi"
      ? (spec.itemsets === undefined ? Array.from({ length: domainSize }, (_, i) => [i])
        : (spec.itemsets as unknown[]).map((x) => intList(x, "itemsets"))) : null;
    this.entries = this.itemsets ? this.itemsets.length
      : this.candidates ? this.candidates.length : domainSize;
    const size = this.entries + this.length;
    const inner = spec.inner ?? "grr";
    if (inner === "grr") {
      this.inner = new GRR(Math.log(this.length * Math.expm1(eps) + 1), size);
    } else if (inner === "olh") {
      this.inner = new LocalHashing("olh", eps, size, LocalHashing.defaultG(eps, size));
    } else {
      throw new Error(`oracle.inner must be grr or olh (resolved), got ${JSON.stringify(inner)}`);
    }
    this.columns = this.inner.columns;
  }
  perturb(v: Value, src: DrawSource): Report {
    const entries = setEntries(itemsOf(v), this.candidates, this.itemsets);
    const s = entries.length;
    const t = below(src, Math.max(s, this.length));
    const x = t < s ? entries[t] : this.entries + below(src, this.length);
    return this.inner.perturb(x, src);
  }
}

/** setsize: min(number of entries, max_size) through the inner frequency oracle. */
class SetSize implements Oracle {
  readonly mechanism = "setsize";
  readonly columns: Column[];
  readonly inner: Oracle;
  readonly maxSize: number;
  readonly candidates: number[] | null;
  readonly itemsets: number[][] | null;
  constructor(eps: number, readonly domainSize: number, spec: OracleSpec) {
    this.candidates = spec.candidates === undefined ? null
      : intList(spec.candidates, "candidates");
    this.itemsets = spec.itemsets === undefined ? null
      : (spec.itemsets as unknown[]).map((x) => intList(x, "itemsets"));
    this.maxSize = intOf(spec, "max_size");
    if (typeof spec.inner !== "string" || spec.inner === "auto") {
      throw new Error("oracle.inner must be the resolved mechanism name");
    }
    this.inner = makeOracle({ mechanism: spec.inner, epsilon: eps,
      domain_size: this.maxSize + 1 });
    this.columns = this.inner.columns;
  }
  perturb(v: Value, src: DrawSource): Report {
    const n = setEntries(itemsOf(v), this.candidates, this.itemsets).length;
    return this.inner.perturb(Math.min(n, this.maxSize), src);
  }
}

// ---- multi-attribute (docs/wire-format.md §4, "Multi-attribute") ----------------------

/** k of q questions without replacement, ascending (partial Fisher-Yates on 0..q-1). */
export function sampleQuestions(src: DrawSource, q: number, k: number): number[] {
  const idx = Array.from({ length: q }, (_, i) => i);
  for (let i = 0; i < k; i++) {
    const j = i + below(src, q - i);
    [idx[i], idx[j]] = [idx[j], idx[i]];
  }
  return idx.slice(0, k).sort((a, b) => a - b);
}

/** multi: `sample` of the attributes (and pairs) per report, each by its oracle at eps/k. */
class Multi implements Oracle {
  readonly mechanism = "multi";
  readonly columns: Column[];
  readonly names: string[];
  readonly subs: Oracle[];
  readonly radix: number[];
  readonly pairs: Array<[number, number]>;
  readonly sample: number;
  readonly domainSize: number;
  constructor(eps: number, spec: OracleSpec) {
    const attrs = spec.attributes as OracleSpec[];
    const pairs = (spec.pairs ?? []) as OracleSpec[];
    if (!Array.isArray(attrs) || !Array.isArray(pairs)) {
      throw new Error("oracle.attributes (and pairs) must be lists of oracle specs");
    }
    this.sample = intOf(spec, "sample");
    const sub = (a: OracleSpec): Oracle => {
      const { name: _n, attributes: _a, ...rest } = a;
      return makeOracle({ ...rest, epsilon: eps / this.sample });
    };
    this.names = attrs.map((a) => a.name as string);
    this.subs = attrs.map(sub);
    this.radix = this.subs.map((o) => o.domainSize);
    this.pairs = pairs.map((p) => {
      const [a, b] = p.attributes as string[];
      return [this.names.indexOf(a), this.names.indexOf(b)];
    });
    for (const p of pairs) {
      this.names.push((p.attributes as string[]).join("*"));
      this.subs.push(sub(p));
    }
    this.domainSize = this.radix.reduce((x, y) => x * y, 1);
    this.columns = [{ name: "attrs", dtype: "uint8", bits: this.names.length }];
    this.names.forEach((name, j) => {
      for (const c of this.subs[j].columns) this.columns.push({ ...c, name: `${name}.${c.name}` });
    });
  }
  /** Mixed-radix index (attribute 0 most significant) → per-attribute indices. */
  split(v: number | bigint): number[] {
    let x = BigInt(v);
    const out = new Array<number>(this.radix.length);
    for (let j = this.radix.length - 1; j >= 0; j--) {
      const r = BigInt(this.radix[j]);
      out[j] = Number(x % r);
      x /= r;
    }
    return out;
  }
  perturb(v: Value, src: DrawSource): Report {
    const row = typeof v === "number" || typeof v === "bigint" ? this.split(v) : Array.from(v);
    if (row.length !== this.radix.length || row.some((x, j) => !(x >= 0 && x < this.radix[j]))) {
      throw new RangeError(`a multi value needs ${this.radix.length} indices within the ` +
                           "attributes' domains");
    }
    const vals = [...row, ...this.pairs.map(([a, b]) => row[a] * this.radix[b] + row[b])];
    const chosen = sampleQuestions(src, this.names.length, this.sample);
    const out: Report = { attrs: chosen };
    this.names.forEach((name, j) => {
      const sub = this.subs[j];
      const rep = chosen.includes(j) ? sub.perturb(vals[j], src) : null;
      for (const c of sub.columns) out[`${name}.${c.name}`] = rep ? rep[c.name] : (c.bits ? [] : 0);
    });
    return out;
  }
}

/** Mechanisms that admit two-level memoization (ldpcore.longitudinal.TwoLevel). */
export const TWO_LEVEL_MECHANISMS = ["grr", "sue", "oue", "olh", "blh", "hrr"];

/** The oracle of a resolved oracle spec (`collection.oracle`), refused (SpecError) if any
 * probability it would draw against is not usable (NaN, 0, 1): a backstop behind the
 * range checks of src/checks.ts. */
export function makeOracle(spec: OracleSpec): Oracle {
  const o = buildOracle(spec);
  const x = o as unknown as Record<string, number> & { inner?: Record<string, number>; b?: number };
  const check = (v: number | undefined, what: string): void => {
    if (v !== undefined) checkProbability(v, `${o.mechanism}: ${what}`);
  };
  switch (o.mechanism) {
    case "sue": case "oue": check(x.p, "p"); check(x.q, "q"); break;
    case "cms": check(x.flip, "the flip probability"); break;
    case "hcms": check(x.keep, "the keep probability"); break;
    case "sw": check(2 * (x.b as number) * x.p, "the in-band probability"); break;
    case "pm": check(x.pBand, "the band probability"); break;
    case "duchi": check(1 / (x.e + 1), "1/(e^epsilon + 1)"); break;
    case "ps": case "psi": check(x.inner?.p, "the inner oracle's p"); break;
    case "setsize": case "hh": case "multi": break; // built of checked oracles
    default: check(x.p, "p");
  }
  return o;
}

function buildOracle(spec: OracleSpec): Oracle {
  const mech = spec.mechanism;
  const eps = num(spec, "epsilon");
  if (mech === "pem") {
    const seed = spec.hash_seed ?? 0;
    return new PEM(eps, intOf(spec, "bits"), (spec.keep as number) ?? 64,
                   (spec.eta as number) ?? 8, (spec.pool as number) ?? 256,
                   BigInt(seed as number | bigint));
  }
  const d = intOf(spec, "domain_size");
  switch (mech) {
    case "grr": return new GRR(eps, d);
    case "sue": case "oue": return new Unary(mech, eps, d);
    case "blh": return new LocalHashing("blh", eps, d, 2);
    case "olh": {
      const g = spec.g === undefined ? LocalHashing.defaultG(eps, d) : intOf(spec, "g");
      return new LocalHashing("olh", eps, d, g);
    }
    case "hr": return new HR(eps, d);
    case "hrr": return new HRR(eps, d);
    case "ss": {
      const e = Math.exp(eps);
      const k = spec.subset_size === undefined
        ? Math.min(d - 1, Math.max(1, roundHalfEven(d / (e + 1)))) : intOf(spec, "subset_size");
      return new SS(eps, d, k);
    }
    case "cms": case "hcms": {
      let m = spec.m === undefined ? 0 : intOf(spec, "m");
      if (m === 0 && mech === "cms") {
        m = Math.max(2, Math.floor(Math.sqrt(d - 1)) + 1);
        while (!isPrime(m)) m++;
      } else if (m === 0) {
        m = 2;
        while (m * m < d) m *= 2;
      }
      return new Sketch(mech, eps, d, m);
    }
    case "ps": case "psi": return new Padded(mech, eps, d, spec);
    case "setsize": return new SetSize(eps, d, spec);
    case "multi": return new Multi(eps, spec);
    case "hh": {
      const consistency = spec.consistency ?? true;
      const fanout = spec.fanout === undefined ? (consistency ? 8 : 4) : intOf(spec, "fanout");
      return new HH(eps, d, fanout, (spec.base as string) ?? "hrr");
    }
    case "haar": return new Haar(eps, d);
    case "sw": return new SW(eps, d, num(spec, "b"), intOf(spec, "out_bins"));
    case "pm": return new PM(eps, d);
    case "duchi": return new Duchi(eps, d);
    default:
      throw new Error(`unknown or unresolved mechanism ${JSON.stringify(mech)} (the SDK ` +
                      "needs the resolved spec the query API serves)");
  }
}

/** The two-level instantaneous channel at epsilon_1 for an oracle that admits it. */
export function makeRerandomizer(oracle: Oracle, epsilon1: number): Rerandomizer {
  const o = oracle as Oracle & Partial<Rerandomizer> & { setInstant?: (e: number) => void };
  if (!TWO_LEVEL_MECHANISMS.includes(oracle.mechanism) || !o.setInstant || !o.rerandomize) {
    throw new Error(`memoization 'two-level' needs a mechanism in ${TWO_LEVEL_MECHANISMS}, ` +
                    `got ${oracle.mechanism}`);
  }
  o.setInstant(epsilon1);
  // epsilon_1 may reach 100 (checks.ts): p1 may round to 1 (the channel keeps the permanent
  // answer, which is private at epsilon); it must still be a probability.
  const x = o as unknown as { p1: number; q1?: number };
  for (const v of [x.p1, x.q1 ?? 0.5]) {
    if (!(v >= 0 && v <= 1)) throw new RangeError(`epsilon_1 ${epsilon1} gives no probability`);
  }
  return o as Rerandomizer;
}
