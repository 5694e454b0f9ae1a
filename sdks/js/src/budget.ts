/**
 * The fleet's privacy budget on the device (docs/budget.md, as ldpcore/budget.py): what one
 * report really costs (`reportCharge`) and the daily ledger kept in the device store
 * (`"ledger"`: ε spent per UTC day and collection, the current and previous day). A report
 * that would take the day's total beyond the budget is not made.
 */
import { StoreError } from "./errors.js";
import { CollectionSpec } from "./spec.js";

export const DAY_SECONDS = 86_400;
/** Float sums of charges may exceed an exact budget by rounding. */
const SLACK = 1e-9;

const grrProbs = (eps: number, k: number): [number, number] => {
  const e = Math.exp(eps);
  return [e / (e + k - 1), 1.0 / (e + k - 1)];
};

const unaryProbs = (mech: string, eps: number): [number, number] => {
  if (mech === "sue") {
    const h = Math.exp(eps / 2);
    return [h / (h + 1), 1 / (h + 1)];
  }
  return [0.5, 1 / (Math.exp(eps) + 1)];
};

/**
 * ε of one fresh report: the oracle's ε, or for two-level the composed channel's one-report
 * ε (RAPPOR's ε₁; ldpcore.longitudinal.TwoLevel.epsilon_report). `g` is the local-hashing
 * range of olh / blh.
 */
export function epsilonPerReport(spec: CollectionSpec, g?: number): number {
  const eps = spec.oracleSpec.epsilon as number;
  if (spec.memoization !== "two-level" || spec.epsilon1 === null) return eps;
  const mech = spec.oracleSpec.mechanism as string;
  const e1 = spec.epsilon1;
  const d = spec.oracleSpec.domain_size as number;
  let pInf: number, qInf: number, p1: number, q1: number;
  if (mech === "grr") {
    [pInf, qInf] = grrProbs(eps, d);
    [p1, q1] = grrProbs(e1, d);
  } else if (mech === "sue" || mech === "oue") {
    [pInf, qInf] = unaryProbs(mech, eps);
    [p1, q1] = unaryProbs(mech, e1);
  } else if (mech === "olh" || mech === "blh") {
    const k = mech === "blh" ? 2 : (g ?? (spec.oracleSpec.g as number));
    [pInf, qInf] = grrProbs(eps, k);
    [p1, q1] = grrProbs(e1, k);
  } else {  // hrr
    const e = Math.exp(eps);
    pInf = e / (e + 1);
    qInf = 1.0 - pInf;
    const x = Math.exp(e1);
    [p1, q1] = [x / (x + 1), 1 / (x + 1)];
  }
  const p = pInf * p1 + (1 - pInf) * q1;
  const q = qInf * p1 + (1 - qInf) * q1;
  if (mech === "sue" || mech === "oue") return Math.log(p * (1 - q) / ((1 - p) * q));
  if (mech === "hrr") return Math.log(p / (1 - p));
  return Math.log(p / q);
}

/**
 * What one report really costs the device that sends it (ldpcore.budget.report_charge):
 * "none" ε always; "permanent" ε when the answer is new (`fresh`: a value not reported
 * before), nothing for a repeat; "two-level" the increase of min(k·ε_report, ε∞) from
 * k = `valueReports` to k + 1.
 */
export function reportCharge(spec: CollectionSpec, fresh: boolean, valueReports = 0,
                             g?: number): number {
  const eps = spec.oracleSpec.epsilon as number;
  if (spec.memoization === "none") return eps;
  if (spec.memoization === "permanent") return fresh ? eps : 0.0;
  const er = epsilonPerReport(spec, g);
  const k = fresh ? 0 : Math.max(0, Math.trunc(valueReports));
  return Math.max(0.0, Math.min((k + 1) * er, eps) - Math.min(k * er, eps));
}

/** The UTC day of epoch seconds `now` (days since 1970-01-01). */
export const utcDay = (now: number): number => Math.floor(now / DAY_SECONDS);

/** The ledger as the store keeps it: the budget and, per UTC day, ε spent per collection. */
export interface LedgerDocument {
  budget: number | null;
  days: Record<string, Record<string, number>>;
}

/** The store's `"ledger"` (null: none), checked; a malformed one is a StoreError. */
export function readLedger(raw: unknown): LedgerDocument | null {
  if (raw === undefined || raw === null) return null;
  const bad = (why: string): StoreError => new StoreError(`the store has a bad ledger: ${why}`);
  if (typeof raw !== "object" || Array.isArray(raw)) throw bad("not an object");
  const r = raw as { budget?: unknown; days?: unknown };
  if (r.budget !== undefined && r.budget !== null && typeof r.budget !== "number") {
    throw bad("budget is not a number");
  }
  const days: Record<string, Record<string, number>> = {};
  const rd = r.days ?? {};
  if (typeof rd !== "object" || Array.isArray(rd)) throw bad("days is not an object");
  for (const [d, cols] of Object.entries(rd as Record<string, unknown>)) {
    if (!/^-?\d+$/.test(d)) throw bad(`day ${JSON.stringify(d)} is not an integer`);
    if (!cols || typeof cols !== "object" || Array.isArray(cols)) throw bad(`day ${d}`);
    const out: Record<string, number> = {};
    for (const [c, v] of Object.entries(cols as Record<string, unknown>)) {
      if (typeof v !== "number" || !Number.isFinite(v)) throw bad(`day ${d}, ${c}`);
      out[c] = v;
    }
    days[String(Number(d))] = out;
  }
  return { budget: (r.budget as number | null | undefined) ?? null, days };
}

/** ε spent on the UTC day of `now`, every collection. */
export function spentOn(ledger: LedgerDocument, now: number): number {
  return Object.values(ledger.days[String(utcDay(now))] ?? {}).reduce((a, b) => a + b, 0);
}

/** True if spending `epsilon` more today stays within the budget. */
export function allows(ledger: LedgerDocument, epsilon: number, now: number): boolean {
  if (ledger.budget === null || epsilon <= 0) return true;
  return spentOn(ledger, now) + epsilon <= ledger.budget * (1 + SLACK);
}

/** Record `epsilon` spent on `collection` today (only today and yesterday are kept). */
export function charge(ledger: LedgerDocument, collection: string, epsilon: number,
                       now: number): void {
  const day = utcDay(now);
  for (const d of Object.keys(ledger.days)) if (Number(d) < day - 1) delete ledger.days[d];
  if (epsilon > 0) {
    const today = ledger.days[String(day)] ?? (ledger.days[String(day)] = {});
    today[collection] = (today[collection] ?? 0) + epsilon;
  }
}

/** The budget option of a Device: ε per UTC day in (0, 1e6]. */
export function checkBudget(budget: number): number {
  if (typeof budget !== "number" || !Number.isFinite(budget) || budget <= 0 || budget > 1e6) {
    throw new RangeError(`budget must be a number in (0, 1000000] (ε per UTC day), got ${budget}`);
  }
  return budget;
}
