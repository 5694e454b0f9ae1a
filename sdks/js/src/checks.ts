/**
 * The parameter ranges ldpcore accepts (src/limits.ts, generated from ldpcore by
 * sdks/vectors/generate.py), enforced on a served spec before any draw: a spec outside them
 * is refused with a SpecError naming the parameter and the allowed range. Beyond the ranges
 * the kernels' probabilities round to 0 or 1 (GRR at ε = 40 would send the raw value) or
 * overflow (ε = 1000 gives NaN); the reasons are in ldpcore/limits.py.
 */
import { SpecError } from "./errors.js";
import { LIMITS } from "./limits.js";

type Spec = Record<string, unknown>;
const EPS = LIMITS.epsilon as Record<string, readonly [number, number]>;
const DOMAIN = LIMITS.domain_size as Record<string, readonly [number, number]>;
const INTS = LIMITS.integers as Record<string, Record<string, readonly [number, number]>>;

function real(spec: Spec, key: string, where: string): number {
  const v = spec[key];
  if (typeof v !== "number" || !Number.isFinite(v)) {
    throw new SpecError(`${where}.${key} must be a finite number, got ${JSON.stringify(v)}`,
      `${where}.${key}`);
  }
  return v;
}

function integer(spec: Spec, key: string, where: string, lo: number, hi: number,
                 dflt?: number): number {
  const v = spec[key] === undefined ? dflt : spec[key];
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < lo || v > hi) {
    throw new SpecError(`${where}.${key} must be an integer in [${lo}, ${hi}], got ` +
      `${JSON.stringify(v)}`, `${where}.${key}`);
  }
  return v;
}

/** Refuse ε outside [lo, hi] for `mech` (at `where`.epsilon, or a derived ε named `what`). */
export function checkEpsilon(mech: string, eps: number, where: string, what?: string): void {
  const range = EPS[mech];
  if (!range) throw new SpecError(`${where}.mechanism: unknown mechanism ${JSON.stringify(mech)}`,
    `${where}.mechanism`);
  const [lo, hi] = range;
  if (!(eps >= lo && eps <= hi)) {
    throw new SpecError(`${what ?? `${where}.epsilon`} must be in [${lo}, ${hi}] for ${mech}, ` +
      `got ${eps}: outside it the mechanism's probabilities round to 0 or 1 (its reports would ` +
      "not be private)", `${where}.epsilon`);
  }
}

function checkDomain(mech: string, d: number, where: string): void {
  const [lo, hi] = DOMAIN[mech];
  if (!(Number.isSafeInteger(d) && d >= lo && d <= hi)) {
    throw new SpecError(`${where}.domain_size must be an integer in [${lo}, ${hi}] for ${mech}, ` +
      `got ${d}`, `${where}.domain_size`);
  }
}

/**
 * Check a resolved oracle spec (the `oracle` of a served collection; `eps` given for the
 * inner oracles whose ε is derived) against ldpcore's ranges, recursively for hh's base,
 * setsize's and ps's inner oracle and multi's attributes.
 */
export function checkOracle(spec: Spec, where = "oracle", derivedEps?: number): void {
  const mech = spec.mechanism;
  if (typeof mech !== "string" || !(mech in EPS)) {
    throw new SpecError(`${where}.mechanism must be one of ${Object.keys(EPS).join(", ")} ` +
      `(resolved), got ${JSON.stringify(mech)}`, `${where}.mechanism`);
  }
  const eps = derivedEps ?? real(spec, "epsilon", where);
  checkEpsilon(mech, eps, where, derivedEps === undefined ? undefined
    : `${where}: the derived epsilon`);
  const ints = INTS[mech] ?? {};
  if (mech === "pem") {
    const bits = integer(spec, "bits", where, ...ints.bits);
    for (const k of ["keep", "eta", "pool"]) if (spec[k] !== undefined) integer(spec, k, where, ...ints[k]);
    if (spec.hash_seed !== undefined) integer(spec, "hash_seed", where, 0, Number.MAX_SAFE_INTEGER);
    checkDomain(mech, 2 ** bits, where);
    return;
  }
  const d = integer(spec, "domain_size", where, ...DOMAIN[mech]);
  switch (mech) {
    case "olh":
      if (spec.g !== undefined) integer(spec, "g", where, ...ints.g);
      break;
    case "cms": case "hcms":
      if (spec.m !== undefined) integer(spec, "m", where, ...ints.m);
      break;
    case "ss":
      if (spec.subset_size !== undefined) integer(spec, "subset_size", where, 1, d - 1);
      break;
    case "sw": {
      if (spec.out_bins !== undefined) integer(spec, "out_bins", where, ...ints.out_bins);
      const [lo, hi] = (LIMITS.reals.sw.b as readonly [number, number]);
      const b = real(spec, "b", where);
      const bMax = Math.min(hi, (1 / LIMITS.probability_floor - 1) / (2 * Math.exp(eps)));
      if (!(b >= lo && b <= bMax)) {
        throw new SpecError(`${where}.b must be in [${lo}, ${bMax}] at epsilon ${eps}, got ${b}`,
          `${where}.b`);
      }
      break;
    }
    case "hh": {
      const base = spec.base ?? "hrr";
      const bases = LIMITS.choices.hh.base as readonly string[];
      if (typeof base !== "string" || !bases.includes(base)) {
        throw new SpecError(`${where}.base must be one of ${bases.join(", ")}, got ` +
          `${JSON.stringify(base)}`, `${where}.base`);
      }
      const fanout = integer(spec, "fanout", where, ...ints.fanout,
        spec.consistency === false ? 4 : 8);
      checkEpsilon(base, eps, where, `${where}.epsilon (with base ${base})`);
      let top = 1;
      while (top < d) top *= fanout;
      checkDomain(base, top, `${where} (base ${base} over fanout^height)`);
      break;
    }
    case "ps": case "psi": {
      const l = integer(spec, "length", where, ...ints.length, 1);
      if (spec.inner === "grr" || spec.inner === undefined) {
        checkEpsilon("grr", Math.log(l * Math.expm1(eps) + 1), where,
          `${where}: the amplified epsilon' = ln(length (e^epsilon - 1) + 1) of its GRR`);
      }
      break;
    }
    case "setsize": {
      const maxSize = integer(spec, "max_size", where, ...ints.max_size);
      if (typeof spec.inner === "string" && spec.inner !== "auto") {
        checkOracle({ mechanism: spec.inner, epsilon: eps, domain_size: maxSize + 1 },
          `${where}.inner`);
      }
      break;
    }
    case "multi": {
      const attrs = spec.attributes;
      if (!Array.isArray(attrs)) {
        throw new SpecError(`${where}.attributes must be a list`, `${where}.attributes`);
      }
      const [lo, hi] = ints.attributes;
      if (attrs.length < lo || attrs.length > hi) {
        throw new SpecError(`${where}.attributes: ${lo} to ${hi} attributes, got ${attrs.length}`,
          `${where}.attributes`);
      }
      const pairs = Array.isArray(spec.pairs) ? spec.pairs : [];
      const k = integer(spec, "sample", where, 1, attrs.length + pairs.length);
      [...attrs, ...pairs].forEach((a, i) => {
        const name = i < attrs.length ? `attributes[${i}]` : `pairs[${i - attrs.length}]`;
        checkOracle(a as Spec, `${where}.${name}`, eps / k);
      });
      break;
    }
    default:
  }
}

/** epsilon_1 of two-level memoization: in (0, max]. */
export function checkEpsilon1(eps1: number): void {
  const [lo, hi] = LIMITS.epsilon_1;
  if (!(typeof eps1 === "number" && eps1 > lo && eps1 <= hi)) {
    throw new SpecError(`epsilon_1 must be in (${lo}, ${hi}], got ${eps1}`, "epsilon_1");
  }
}

/** The last line of defence after a mechanism computed its probabilities: every one must be a
 * finite number in [floor, 1 - floor] (never NaN, 0 or 1). */
export function checkProbability(p: number, what: string): void {
  const f = LIMITS.probability_floor;
  if (!(p >= f && p <= 1 - f)) {
    throw new SpecError(`${what} = ${p} is not a usable probability: the spec's parameters are ` +
      "outside the ranges the SDK supports", null);
  }
}
