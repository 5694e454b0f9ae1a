/**
 * Random draws (docs/wire-format.md §4): every mechanism consumes a stream of uniform
 * u32 words through three primitives, in a documented order, so that the same words give
 * the same reports in every language.
 */
import { hmacSha256 } from "./sha256.js";

/** A source of uniform 32-bit words. */
export interface DrawSource {
  /** The next word, an integer in [0, 2^32). */
  nextU32(): number;
}

const TWO53 = 9007199254740992;
const TWO32 = 4294967296;

/** Words from the platform CSPRNG (`crypto.getRandomValues`), fetched 256 at a time. */
export class CryptoSource implements DrawSource {
  private buf = new Uint32Array(256);
  private at = 256;
  private readonly crypto: { getRandomValues<T extends ArrayBufferView | null>(a: T): T };

  constructor() {
    const c = (globalThis as { crypto?: CryptoSource["crypto"] }).crypto;
    if (!c || typeof c.getRandomValues !== "function") {
      throw new Error("crypto.getRandomValues is not available: the SDK needs a CSPRNG");
    }
    this.crypto = c;
  }

  nextU32(): number {
    if (this.at >= this.buf.length) {
      this.crypto.getRandomValues(this.buf);
      this.at = 0;
    }
    return this.buf[this.at++];
  }
}

/** A fixed list of words (test vectors); throws when exhausted. */
export class WordStream implements DrawSource {
  used = 0;
  constructor(private readonly words: readonly number[]) {}

  nextU32(): number {
    if (this.used >= this.words.length) {
      throw new Error(`word stream exhausted after ${this.used} words`);
    }
    return this.words[this.used++];
  }
}

/** A float64 uniform on [0, 1) from two words: ((a >>> 5) * 2^26 + (b >>> 6)) / 2^53. */
export function uniform(src: DrawSource): number {
  const a = src.nextU32() >>> 5;
  const b = src.nextU32() >>> 6;
  return (a * 67108864 + b) / TWO53;
}

/** A uniform integer in [0, n), 1 <= n <= 2^32, by rejection (at least one word). */
export function below(src: DrawSource, n: number): number {
  if (!(n >= 1 && n <= TWO32) || Math.floor(n) !== n) {
    throw new RangeError(`n must be an integer in [1, 2^32], got ${n}`);
  }
  const limit = Math.floor(TWO32 / n) * n;
  for (;;) {
    const w = src.nextU32();
    if (w < limit) return w % n;
  }
}

/** True with probability p: uniform() < p. */
export function bernoulli(src: DrawSource, p: number): boolean {
  return uniform(src) < p;
}

/** `n` bytes from the platform CSPRNG (`crypto.getRandomValues`). */
export function randomBytes(n: number): Uint8Array {
  const c = (globalThis as { crypto?: { getRandomValues(a: Uint8Array): Uint8Array } }).crypto;
  if (!c || typeof c.getRandomValues !== "function") {
    throw new Error("crypto.getRandomValues is not available: the SDK needs a CSPRNG");
  }
  return c.getRandomValues(new Uint8Array(n));
}

/** A random (version 4) UUID from the CSPRNG: the Idempotency-Key of a request. */
export function randomUuid(): string {
  const b = randomBytes(16);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const PRR_LABEL = "ldpstream/prr/v1";

/**
 * The word stream of a permanent answer (docs/wire-format.md, "Permanent answers";
 * ldpcore.reference.PermanentWords): seed = HMAC-SHA256(secret, "ldpstream/prr/v1" 0x00
 * fingerprint 0x00 key), block i = HMAC-SHA256(seed, u32be(i)), read as little-endian words.
 */
export class PermanentWords implements DrawSource {
  private readonly seed: Uint8Array;
  private block = 0;
  private buf: Uint8Array = new Uint8Array(0);
  private at = 0;
  used = 0;

  constructor(secret: Uint8Array, fingerprint: string, key: string | bigint | number) {
    if (secret.length < 16 || secret.length > 64) {
      throw new RangeError("a device secret must be 16 to 64 bytes");
    }
    const text = new TextEncoder().encode(`${PRR_LABEL}\u0000${fingerprint}\u0000${String(key)}`);
    this.seed = hmacSha256(secret, text);
  }

  nextU32(): number {
    if (this.at >= this.buf.length) {
      const ctr = new Uint8Array(4);
      new DataView(ctr.buffer).setUint32(0, this.block++, false);
      this.buf = hmacSha256(this.seed, ctr);
      this.at = 0;
    }
    const b = this.buf;
    const w = (b[this.at] | (b[this.at + 1] << 8) | (b[this.at + 2] << 16) |
      (b[this.at + 3] << 24)) >>> 0;
    this.at += 4;
    this.used++;
    return w;
  }
}
