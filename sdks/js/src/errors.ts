/** The SDK's typed errors (each a built-in error subclass, so `instanceof RangeError` etc. hold). */

/** A collection spec the SDK refuses: malformed, altered (fingerprint), or outside the
 * parameter ranges ldpcore accepts (e.g. GRR with ε = 40 would send the raw value). */
export class SpecError extends RangeError {
  /** The offending key, e.g. "oracle.epsilon" (null when the spec as a whole is wrong). */
  readonly parameter: string | null;
  constructor(message: string, parameter: string | null = null) {
    super(message);
    this.name = "SpecError";
    this.parameter = parameter;
  }
}

/** The device store is not readable as a device store (it is left untouched). */
export class StoreError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StoreError";
  }
}
