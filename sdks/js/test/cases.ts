/** The shared test vectors (sdks/vectors), for the tests. */
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { Input } from "../src/spec.js";

const HERE = dirname(fileURLToPath(import.meta.url));
export const VECTORS = join(HERE, "..", "..", "..", "vectors");

interface Case {
  name: string;
  collection: Record<string, unknown>;
  canonical: string;
  fingerprint: string;
  oracle_canonical: string;
  oracle_fingerprint: string;
  inputs: Input[];
  values: unknown[];
  phases?: Array<{ secret: string; phase: number | null; takes_part: boolean }>;
  words: number[];
  permanent?: Record<string, unknown>[];
  reports: Record<string, unknown>[];
  message_binary: string;
  message_json: string;
}

export function loadCases(): Case[] {
  const out: Case[] = [];
  for (const f of readdirSync(VECTORS).filter((n) => n.endsWith(".json")).sort()) {
    out.push(...JSON.parse(readFileSync(join(VECTORS, f), "utf8")).cases);
  }
  return out;
}


interface PermanentCase {
  name: string;
  collection: Record<string, unknown>;
  secret: string;
  inputs: Input[];
  keys: string[];
  words: number[];
  permanent: Record<string, unknown>[];
  message_binary: string;
  message_json: string;
}

/** The permanent answers of device secrets (sdks/vectors/permanent). */
export function loadPermanentCases(): PermanentCase[] {
  return JSON.parse(readFileSync(join(VECTORS, "permanent", "permanent.json"), "utf8")).cases;
}

/** ldpcore's parameter ranges (sdks/vectors/limits). */
export function loadLimits(): Record<string, unknown> {
  return JSON.parse(readFileSync(join(VECTORS, "limits", "limits.json"), "utf8"));
}
