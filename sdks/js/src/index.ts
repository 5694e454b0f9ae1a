/**
 * ldpstream device SDK (docs/wire-format.md): a Device perturbs values with its collection's
 * ε-LDP mechanism, keeps the cadence and queues reports in the platform's private store; a
 * GatewayClient posts them (with Privacy Pass tokens when given an issuer). Mechanisms,
 * draws, encodings and the token protocol are internal.
 */
export { Accepted, GatewayClient, GatewayError, GatewayOptions, QueueResult } from "./client.js";
export { Device, DeviceOptions, EnqueueOptions } from "./device.js";
export { SpecError, StoreError } from "./errors.js";
export type { Report } from "./mechanisms.js";
export { IssuanceError } from "./privacypass.js";
export type { TokenWallet } from "./privacypass.js";
export {
  CollectionJson, CollectionSpec, Domain, Input, Memoization, ProtocolJson, ScalarDomain, fetchSpec,
} from "./spec.js";
export {
  DeviceStore, IndexedDbStore, KeyValueStorage, KeyValueStore, MemoryStore, QueuedReport,
  StoreDocument, defaultStore,
} from "./store.js";
