/**
 * Canonical JSON, byte for byte as ldpcore's `canonical_json` (Python's
 * `json.dumps(sort_keys=True, separators=(",", ":"))`, ensure_ascii), and fingerprints.
 */
import { sha256Hex } from "./sha256.js";

/** A float that must print as Python's repr (`1.0`, not `1`). */
export class PyFloat {
  constructor(readonly value: number) {}
}

export type Canon = null | boolean | number | bigint | string | PyFloat | Canon[] |
  { [key: string]: Canon };

/** Python's `repr(float)`: shortest round-trip digits, positional for exponents in [-4, 16). */
export function pyFloat(x: number): string {
  if (!Number.isFinite(x)) throw new RangeError(`not a finite number: ${x}`);
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [mant, expText] = x.toExponential().split("e");
  const exp = parseInt(expText, 10);
  const neg = mant.startsWith("-");
  const digits = mant.replace("-", "").replace(".", "");
  let body: string;
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      const intPart = digits.length > exp + 1 ? digits.slice(0, exp + 1)
        : digits + "0".repeat(exp + 1 - digits.length);
      const frac = digits.length > exp + 1 ? digits.slice(exp + 1) : "0";
      body = `${intPart}.${frac}`;
    } else {
      body = `0.${"0".repeat(-exp - 1)}${digits}`;
    }
  } else {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const e = Math.abs(exp).toString().padStart(2, "0");
    body = `${m}e${exp < 0 ? "-" : "+"}${e}`;
  }
  return neg ? `-${body}` : body;
}

/** A JSON string literal as Python writes it with ensure_ascii. */
export function pyString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ch = s[i];
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (ch === "\b") out += "\\b";
    else if (ch === "\f") out += "\\f";
    else if (c < 0x20 || c > 0x7e) out += "\\u" + c.toString(16).padStart(4, "0");
    else out += ch;
  }
  return out + '"';
}

/** Canonical JSON text (sorted keys by code point, no spaces). */
export function canonicalJson(v: Canon): string {
  if (v === null) return "null";
  if (v instanceof PyFloat) return pyFloat(v.value);
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v === "bigint") return v.toString();
  if (typeof v === "number") {
    if (!Number.isSafeInteger(v)) throw new RangeError(`integer expected, got ${v}`);
    return v.toString();
  }
  if (typeof v === "string") return pyString(v);
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  const keys = Object.keys(v).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${keys.map((k) => `${pyString(k)}:${canonicalJson(v[k])}`).join(",")}}`;
}

/** 16-hex-digit fingerprint: SHA-256 prefix of the canonical JSON. */
export function fingerprintOf(v: Canon): string {
  return sha256Hex(new TextEncoder().encode(canonicalJson(v))).slice(0, 16);
}
