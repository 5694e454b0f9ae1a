/** ldpstream device SDK (docs/wire-format.md). */
export { Canon, PyFloat, canonicalJson, fingerprintOf, pyFloat, pyString } from "./canonical.js";
export { Accepted, GatewayClient, GatewayError, GatewayOptions, retryAfterMs } from "./client.js";
export {
  Device, DeviceOptions, KeyValueStorage, MEMO_FORMAT, MEMO_VERSION, devicePhase,
} from "./device.js";
export { encodeBinary, encodeJson, frameMessages, toRecords } from "./encode.js";
export {
  Column, Dtype, Oracle, OracleSpec, Report, Rerandomizer, TWO_LEVEL_MECHANISMS, Value,
  itemsOf, makeOracle, makeRerandomizer, pcg64Words, pemSchedule, sampleQuestions,
} from "./mechanisms.js";
export {
  IssuanceError, IssuerOptions, RsaKey, TokenState, TokenWallet, authorizationHeader,
  beginRequest, b64url, b64urlDecode, deviceCredential, finalizeToken, keyFromSpki, messageHead,
  pssVerify, redemptionContext, tokenChallenge, tokenFrames,
} from "./privacypass.js";
export { CryptoSource, DrawSource, WordStream, below, bernoulli, uniform } from "./random.js";
export { hmacSha256, sha256Hex } from "./sha256.js";
export {
  CollectionJson, CollectionSpec, Domain, Input, Memoization, PHASES, ProtocolJson, ScalarDomain,
  fetchSpec,
} from "./spec.js";
