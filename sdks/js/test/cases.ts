/** The shared test vectors (sdks/vectors), for the tests. */
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { Input } from "../src/index.js";

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

