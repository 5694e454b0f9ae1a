/**
 * Random draws (docs/wire-format.md §4): every mechanism consumes a stream of uniform
 * u32 words through three primitives, in a documented order, so that the same words give
 * the same reports in every language.
 */

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
