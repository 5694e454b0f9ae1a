/** Message encoding (docs/wire-format.md §2): the LDPM envelope around an LDPR batch. */
import { pyString } from "./canonical.js";
import { Column, Report } from "./mechanisms.js";
import { CollectionSpec } from "./spec.js";

const DTYPE_CODE = { uint8: 0, uint16: 1, uint32: 2 } as const;
const DTYPE_SIZE = { uint8: 1, uint16: 2, uint32: 4 } as const;

function ascii(s: string): number[] {
  const out: number[] = [];
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 0x7f) throw new Error(`not ASCII: ${s}`);
    out.push(c);
  }
  return out;
}

function perReport(c: Column): number {
  return c.bits ? Math.ceil(c.bits / 8) : DTYPE_SIZE[c.dtype];
}

/** The binary message (one collection's batch of reports). */
export function encodeBinary(spec: CollectionSpec, columns: Column[], reports: Report[]
): Uint8Array {
  const id = ascii(spec.id);
  const mech = ascii(spec.oracleSpec.mechanism as string);
  const head: number[] = [0x4c, 0x44, 0x50, 0x4d, 1, id.length, ...id, ...ascii(spec.fingerprint),
    0x4c, 0x44, 0x50, 0x52, 1, mech.length, ...mech, ...ascii(spec.oracleFingerprint)];
  const n = reports.length;
  const table: number[] = [];
  for (const c of columns) {
    const nm = ascii(c.name);
    const per = perReport(c);
    table.push(nm.length, ...nm, DTYPE_CODE[c.dtype], per & 0xff, per >> 8);
  }
  const bodySize = columns.reduce((s, c) => s + n * perReport(c), 0);
  const out = new Uint8Array(head.length + 5 + table.length + bodySize);
  const view = new DataView(out.buffer);
  out.set(head, 0);
  let off = head.length;
  view.setUint32(off, n, true);
  out[off + 4] = columns.length;
  off += 5;
  out.set(table, off);
  off += table.length;
  for (const c of columns) {
    const per = perReport(c);
    for (const r of reports) {
      const v = r[c.name];
      if (c.bits) {
        for (const i of v as number[]) {
          if (!(i >= 0 && i < c.bits)) throw new RangeError(`bit ${i} outside ${c.name}`);
          out[off + (i >> 3)] |= 1 << (i & 7);
        }
      } else if (c.dtype === "uint8") {
        view.setUint8(off, v as number);
      } else if (c.dtype === "uint16") {
        view.setUint16(off, v as number, true);
      } else {
        view.setUint32(off, v as number, true);
      }
      off += per;
    }
  }
  return out;
}

/** JSON records of the reports (ldpcore.wire.to_records). */
export function toRecords(spec: CollectionSpec, columns: Column[], reports: Report[]
): Record<string, unknown>[] {
  return reports.map((r) => {
    const rec: Record<string, unknown> = {
      mechanism: spec.oracleSpec.mechanism, fingerprint: spec.oracleFingerprint,
    };
    for (const c of columns) rec[c.name] = r[c.name];
    return rec;
  });
}

/** The JSON message text, byte for byte as ldpcore's `encode_message(..., "json")`. */
export function encodeJson(spec: CollectionSpec, columns: Column[], reports: Report[]): string {
  const recs = reports.map((r) => {
    const parts = [`"mechanism":${pyString(spec.oracleSpec.mechanism as string)}`,
      `"fingerprint":${pyString(spec.oracleFingerprint)}`];
    for (const c of columns) {
      const v = r[c.name];
      parts.push(`${pyString(c.name)}:${Array.isArray(v) ? `[${v.join(",")}]` : String(v)}`);
    }
    return `{${parts.join(",")}}`;
  });
  return `{"collection":${pyString(spec.id)},"fingerprint":${pyString(spec.fingerprint)},` +
    `"reports":[${recs.join(",")}]}`;
}

/** Frame binary messages for `application/x-ldp-frames` (u32 LE length prefixes). */
export function frameMessages(messages: Uint8Array[]): Uint8Array {
  const total = messages.reduce((s, m) => s + 4 + m.length, 0);
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  let off = 0;
  for (const m of messages) {
    view.setUint32(off, m.length, true);
    out.set(m, off + 4);
    off += 4 + m.length;
  }
  return out;
}
