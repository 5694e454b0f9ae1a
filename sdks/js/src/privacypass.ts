/**
 * Privacy Pass for devices (docs/privacy-pass.md): RFC 9578 token type 2 (blind RSA-2048,
 * RFC 9474 RSABSSA-SHA384-PSS-Deterministic), the ldpstream (collection, window) challenge,
 * the issuer client and a token wallet.  WebCrypto (SHA-256/384, HMAC, random bytes) and
 * BigInt only: no dependency, the same code in browsers and Node >= 18.
 */
import { hmacSha256 } from "./sha256.js";

export const TOKEN_TYPE = 2;
export const NK = 256;
export const TOKEN_LEN = 2 + 32 + 32 + 32 + NK;
export const TOKEN_REQUEST_LEN = 2 + 1 + NK;
const SALT_LEN = 48;
const HLEN = 48;

const subtle = (): SubtleCrypto => {
  const c = (globalThis as { crypto?: Crypto }).crypto;
  if (!c?.subtle) throw new Error("Privacy Pass needs WebCrypto (globalThis.crypto.subtle)");
  return c.subtle;
};
const randomBytes = (n: number): Uint8Array => {
  const out = new Uint8Array(n);
  (globalThis as { crypto: Crypto }).crypto.getRandomValues(out);
  return out;
};

export async function sha256(data: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await subtle().digest("SHA-256", data as unknown as ArrayBuffer));
}
export async function sha384(data: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await subtle().digest("SHA-384", data as unknown as ArrayBuffer));
}

export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
}
const ascii = (s: string): Uint8Array => new TextEncoder().encode(s);
const u16 = (n: number): Uint8Array => new Uint8Array([(n >> 8) & 0xff, n & 0xff]);

export function os2ip(b: Uint8Array): bigint {
  let x = 0n;
  for (const v of b) x = (x << 8n) | BigInt(v);
  return x;
}
export function i2osp(x: bigint, len: number): Uint8Array {
  const out = new Uint8Array(len);
  for (let i = len - 1; i >= 0; i--) { out[i] = Number(x & 0xffn); x >>= 8n; }
  if (x !== 0n) throw new Error("integer too large");
  return out;
}
export function modPow(base: bigint, exp: bigint, mod: bigint): bigint {
  let r = 1n;
  base %= mod;
  while (exp > 0n) {
    if (exp & 1n) r = (r * base) % mod;
    base = (base * base) % mod;
    exp >>= 1n;
  }
  return r;
}
export function modInverse(a: bigint, m: bigint): bigint {
  let [r0, r1, s0, s1] = [a % m, m, 1n, 0n];
  while (r1 !== 0n) {
    const q = r0 / r1;
    [r0, r1] = [r1, r0 - q * r1];
    [s0, s1] = [s1, s0 - q * s1];
  }
  if (r0 !== 1n) throw new Error("not invertible");
  return ((s0 % m) + m) % m;
}
const gcd = (a: bigint, b: bigint): bigint => { while (b) [a, b] = [b, a % b]; return a; };
const bitLength = (x: bigint): number => x.toString(2).length;

async function mgf1(seed: Uint8Array, len: number): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for (let c = 0; parts.length * HLEN < len; c++) {
    parts.push(await sha384(concat(seed, new Uint8Array([c >>> 24, (c >>> 16) & 255,
      (c >>> 8) & 255, c & 255]))));
  }
  return concat(...parts).slice(0, len);
}

/** EMSA-PSS-ENCODE (RFC 8017 §9.1.1) with SHA-384, MGF1-SHA-384. */
export async function emsaPssEncode(msg: Uint8Array, emBits: number, salt: Uint8Array
): Promise<Uint8Array> {
  const mHash = await sha384(msg);
  const emLen = Math.ceil(emBits / 8);
  const h = await sha384(concat(new Uint8Array(8), mHash, salt));
  const db = concat(new Uint8Array(emLen - salt.length - HLEN - 2), new Uint8Array([1]), salt);
  const mask = await mgf1(h, emLen - HLEN - 1);
  const masked = db.map((v, i) => v ^ mask[i]);
  masked[0] &= 0xff >> (8 * emLen - emBits);
  return concat(masked, h, new Uint8Array([0xbc]));
}

/** RSASSA-PSS-VERIFY (RFC 8017 §8.1.2), SHA-384, salt 48. */
export async function pssVerify(key: RsaKey, msg: Uint8Array, sig: Uint8Array): Promise<boolean> {
  if (sig.length !== NK) return false;
  const s = os2ip(sig);
  if (s >= key.n) return false;
  const emBits = bitLength(key.n) - 1;
  const em = i2osp(modPow(s, key.e, key.n), Math.ceil(emBits / 8));
  const emLen = em.length;
  if (em[emLen - 1] !== 0xbc) return false;
  const masked = em.slice(0, emLen - HLEN - 1);
  const h = em.slice(emLen - HLEN - 1, emLen - 1);
  if (masked[0] & ~(0xff >> (8 * emLen - emBits))) return false;
  const mask = await mgf1(h, emLen - HLEN - 1);
  const db = masked.map((v, i) => v ^ mask[i]);
  db[0] &= 0xff >> (8 * emLen - emBits);
  const ps = emLen - HLEN - SALT_LEN - 2;
  for (let i = 0; i < ps; i++) if (db[i] !== 0) return false;
  if (db[ps] !== 1) return false;
  const salt = db.slice(db.length - SALT_LEN);
  const h2 = await sha384(concat(new Uint8Array(8), await sha384(msg), salt));
  return h2.every((v, i) => v === h[i]);
}

export interface RsaKey { n: bigint; e: bigint; spki: Uint8Array; keyId: Uint8Array }

const PSS_ALG = (() => {
  const sha384Id = [0x30, 0x0b, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02];
  return new Uint8Array([0x30, 0x3d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01,
    0x0a, 0x30, 0x30, 0xa0, 0x0d, ...sha384Id, 0xa1, 0x1a, 0x30, 0x18, 0x06, 0x09, 0x2a, 0x86,
    0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x08, ...sha384Id, 0xa2, 0x03, 0x02, 0x01, 0x30]);
})();

function derRead(d: Uint8Array, at: number, tag: number): [Uint8Array, number] {
  if (d[at] !== tag) throw new Error("bad DER in the issuer key");
  let n = d[at + 1];
  at += 2;
  if (n & 0x80) {
    const w = n & 0x7f;
    n = 0;
    for (let i = 0; i < w; i++) n = (n << 8) | d[at + i];
    at += w;
  }
  if (at + n > d.length) throw new Error("bad DER in the issuer key");
  return [d.slice(at, at + n), at + n];
}

/** The RSA key of an RSASSA-PSS SubjectPublicKeyInfo (RFC 9578 §6.5). */
export async function keyFromSpki(spki: Uint8Array): Promise<RsaKey> {
  const [body] = derRead(spki, 0, 0x30);
  if (!PSS_ALG.every((v, i) => body[i] === v)) {
    throw new Error("not an RSASSA-PSS (SHA-384, salt 48) key");
  }
  const [bits] = derRead(body, PSS_ALG.length, 0x03);
  const [seq] = derRead(bits, 1, 0x30);
  const [n, at] = derRead(seq, 0, 0x02);
  const [e] = derRead(seq, at, 0x02);
  const key = { n: os2ip(n), e: os2ip(e), spki, keyId: await sha256(spki) };
  if (bitLength(key.n) !== 8 * NK) throw new Error("the issuer key must be RSA-2048");
  return key;
}

/** SHA-256("ldpstream-token-v1" 0 collection 0 decimal(window)). */
export function redemptionContext(collection: string, window: number): Promise<Uint8Array> {
  return sha256(concat(ascii("ldpstream-token-v1"), new Uint8Array([0]), ascii(collection),
    new Uint8Array([0]), ascii(String(window))));
}

/** The TokenChallenge of the reports of `collection` in the window starting at `window`. */
export async function tokenChallenge(issuerName: string, collection: string, window: number
): Promise<Uint8Array> {
  const issuer = ascii(issuerName);
  const origin = ascii(collection);
  return concat(u16(TOKEN_TYPE), u16(issuer.length), issuer, new Uint8Array([32]),
    await redemptionContext(collection, window), u16(origin.length), origin);
}

export interface TokenState { tokenInput: Uint8Array; inv: bigint; key: RsaKey }

/** A TokenRequest (RFC 9578 §6.1) and the state to finalize it; nonce, salt and blind
 * `r` from the CSPRNG unless given (test vectors). */
export async function beginRequest(key: RsaKey, challenge: Uint8Array,
  fixed: { nonce?: Uint8Array; salt?: Uint8Array; r?: bigint } = {}
): Promise<{ request: Uint8Array; state: TokenState }> {
  const nonce = fixed.nonce ?? randomBytes(32);
  const tokenInput = concat(u16(TOKEN_TYPE), nonce, await sha256(challenge), key.keyId);
  const salt = fixed.salt ?? randomBytes(SALT_LEN);
  const m = os2ip(await emsaPssEncode(tokenInput, bitLength(key.n) - 1, salt));
  if (gcd(m, key.n) !== 1n) throw new Error("the encoded message is not invertible");
  let r = fixed.r;
  while (r === undefined || r <= 0n || r >= key.n || gcd(r, key.n) !== 1n) {
    r = os2ip(randomBytes(NK + 16)) % key.n;
  }
  const inv = modInverse(r, key.n);
  const z = (m * modPow(r, key.e, key.n)) % key.n;
  return { request: concat(u16(TOKEN_TYPE), new Uint8Array([key.keyId[31]]), i2osp(z, NK)),
    state: { tokenInput, inv, key } };
}

/** The Token from the issuer's TokenResponse (RFC 9578 §6.3); throws if it does not verify. */
export async function finalizeToken(state: TokenState, response: Uint8Array): Promise<Uint8Array> {
  if (response.length !== NK) throw new Error(`a TokenResponse is ${NK} bytes`);
  const sig = i2osp((os2ip(response) * state.inv) % state.key.n, NK);
  if (!(await pssVerify(state.key, state.tokenInput, sig))) {
    throw new Error("the issuer's signature does not verify");
  }
  return concat(state.tokenInput, sig);
}

export function b64url(b: Uint8Array, pad = false): string {
  let s = "";
  for (const v of b) s += String.fromCharCode(v);
  const t = btoa(s).replace(/\+/g, "-").replace(/\//g, "_");
  return pad ? t : t.replace(/=+$/, "");
}
export function b64urlDecode(s: string): Uint8Array {
  const t = s.replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "");
  const bin = atob(t + "=".repeat((4 - (t.length % 4)) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

/** What the device shows the issuer (X-LDP-Device): one-way, the secret stays here. */
export function deviceCredential(secret: Uint8Array): string {
  return b64url(hmacSha256(secret, ascii("ldpstream issuer credential v1")));
}

/** `PrivateToken token="…"` (RFC 9577 §2.2). */
export function authorizationHeader(token: Uint8Array): string {
  return `PrivateToken token="${b64url(token)}"`;
}

/** An application/x-ldp-token-frames body of (tokens, message) pairs. */
export function tokenFrames(items: Array<[Uint8Array[], Uint8Array]>): Uint8Array {
  const parts: Uint8Array[] = [];
  for (const [tokens, msg] of items) {
    parts.push(new Uint8Array([tokens.length & 255, tokens.length >> 8]), ...tokens);
    const n = msg.length;
    parts.push(new Uint8Array([n & 255, (n >> 8) & 255, (n >> 16) & 255, n >>> 24]), msg);
  }
  return concat(...parts);
}

export class IssuanceError extends Error {
  constructor(readonly status: number, readonly reason: string, detail: string) {
    super(`${status} ${reason}: ${detail}`);
    this.name = "IssuanceError";
  }
}

export interface IssuerOptions {
  /** The issuer's origin, e.g. "https://tokens.example.org". */
  url: string;
  /** The device's persistent secret (the issuer counts its quota against it). */
  deviceSecret: Uint8Array;
  fleetKey?: string;
  fetch?: typeof fetch;
}

interface DirKey { collection: string; window: number; windowSeconds: number; key: RsaKey }

/**
 * A device's tokens per (collection, window): obtained from the issuer when needed (the
 * cadence's worth at once, at most the quota), spent one per report, dropped when their
 * window is over.  The key is taken from the issuer directory and must name the collection
 * and window asked for; the challenge is computed here (the issuer cannot tag it).
 */
export class TokenWallet {
  private readonly keys = new Map<string, DirKey>();
  private readonly tokens = new Map<string, Uint8Array[]>();
  private issuerName = "ldpstream";
  private readonly credential: string;
  private readonly f: typeof fetch;

  constructor(private readonly o: IssuerOptions) {
    this.credential = deviceCredential(o.deviceSecret);
    this.f = o.fetch ?? ((...a) => globalThis.fetch(...a));
  }

  private base(): string { return this.o.url.replace(/\/+$/, ""); }

  /** The key of `collection` whose window holds `nowS` (or `window` if given). */
  async key(collection: string, nowS: number, window?: number): Promise<DirKey> {
    const find = (): DirKey | undefined => [...this.keys.values()].find((k) =>
      k.collection === collection && (window !== undefined ? k.window === window
        : k.window <= nowS && nowS < k.window + k.windowSeconds));
    let hit = find();
    if (hit) return hit;
    const resp = await this.f(`${this.base()}/.well-known/private-token-issuer-directory` +
      `?collection=${encodeURIComponent(collection)}`);
    await raise(resp);
    const doc = await resp.json() as Record<string, unknown>;
    this.issuerName = String(doc["ldp-issuer-name"] ?? "ldpstream");
    for (const e of (doc["token-keys"] ?? []) as Array<Record<string, unknown>>) {
      if (e["token-type"] !== TOKEN_TYPE || e["ldp-collection"] !== collection) continue;
      const w = Number(e["ldp-window"]);
      this.keys.set(`${collection}\u0000${w}`, { collection, window: w,
        windowSeconds: Number(e["ldp-window-seconds"]),
        key: await keyFromSpki(b64urlDecode(String(e["token-key"]))) });
    }
    hit = find();
    if (!hit) throw new IssuanceError(404, "no_key", `no key of ${collection} for that window`);
    return hit;
  }

  /** `n` tokens of `collection` for its window at `nowS` (epoch seconds). */
  async take(collection: string, n: number, want: number, nowS: number, window?: number
  ): Promise<{ window: number; tokens: Uint8Array[] }> {
    const k = await this.key(collection, nowS, window);
    const id = `${collection}\u0000${k.window}`;
    const have = this.tokens.get(id) ?? [];
    if (have.length < n) {
      const count = Math.max(n - have.length, want);
      const ch = await tokenChallenge(this.issuerName, collection, k.window);
      const pending = await Promise.all(Array.from({ length: count },
        () => beginRequest(k.key, ch)));
      const resp = await this.f(`${this.base()}/token-request?collection=` +
        `${encodeURIComponent(collection)}&window=${k.window}`, { method: "POST",
        headers: { "content-type": "application/private-token-request",
          accept: "application/private-token-response", "x-ldp-device": this.credential,
          ...(this.o.fleetKey ? { authorization: `Bearer ${this.o.fleetKey}` } : {}) },
        body: concat(...pending.map((p) => p.request)) as unknown as BodyInit });
      await raise(resp);
      const body = new Uint8Array(await resp.arrayBuffer());
      if (body.length !== NK * count) throw new Error("short TokenResponse");
      for (let i = 0; i < count; i++) {
        have.push(await finalizeToken(pending[i].state, body.slice(i * NK, (i + 1) * NK)));
      }
    }
    this.tokens.set(id, have.slice(n));
    for (const [key, dk] of this.keys) {  // forget windows that are over
      if (dk.collection === collection && dk.window + dk.windowSeconds < nowS - dk.windowSeconds) {
        this.keys.delete(key);
        this.tokens.delete(key);
      }
    }
    return { window: k.window, tokens: have.slice(0, n) };
  }
}

async function raise(resp: Response): Promise<void> {
  if (resp.status < 400) return;
  let body: { reason?: string; detail?: string } = {};
  try { body = await resp.json() as typeof body; } catch { body = {}; }
  throw new IssuanceError(resp.status, body.reason ?? "error", body.detail ?? "");
}

/** (collection id, report count) of a binary message (docs/wire-format.md). */
export function messageHead(msg: Uint8Array): { collection: string; reports: number } {
  const idLen = msg[5];
  const collection = new TextDecoder().decode(msg.slice(6, 6 + idLen));
  let at = 6 + idLen + 16 + 4 + 1;  // envelope, "LDPR", wire version
  at += 1 + msg[at] + 16;  // mechanism, oracle fingerprint
  const reports = msg[at] | (msg[at + 1] << 8) | (msg[at + 2] << 16) | (msg[at + 3] << 24);
  return { collection, reports: reports >>> 0 };
}
