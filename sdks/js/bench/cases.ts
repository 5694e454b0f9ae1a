/** The benchmark collections: sdks/bench/cases.json, shared with the Java SDK's bench. */
import { readFileSync } from "node:fs";

const FILE = new URL("../../../bench/cases.json", import.meta.url);

export const BENCH_CASES = JSON.parse(readFileSync(FILE, "utf8")) as
  Array<[string, Record<string, unknown>]>;
