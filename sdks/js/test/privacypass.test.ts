/** Privacy Pass against the shared vectors (sdks/vectors/privacypass): the challenge, the
 * token request (fixed nonce, salt and blind), the finalized token, the device credential
 * and the three carriages; and a tampered token does not verify. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import {
  authorizationHeader, b64urlDecode, beginRequest, deviceCredential, finalizeToken,
  keyFromSpki, messageHead, pssVerify, tokenChallenge, tokenFrames,
} from "../src/privacypass.js";
import { VECTORS } from "./cases.js";

const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");
const unhex = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, "hex"));
const cases = JSON.parse(readFileSync(join(VECTORS, "privacypass", "tokens.json"), "utf8")).cases;

for (const [i, c] of cases.entries()) {
  test(`privacy pass vector ${i}`, async () => {
    const key = await keyFromSpki(b64urlDecode(c.token_key));
    assert.equal(key.n.toString(16), c.n);
    assert.equal(hex(key.keyId), c.token_key_id);
    const ch = await tokenChallenge(c.issuer_name, c.collection, c.window);
    assert.equal(hex(ch), c.token_challenge);
    const { request, state } = await beginRequest(key, ch, { nonce: unhex(c.nonce),
      salt: unhex(c.salt), r: BigInt(`0x${c.blind}`) });
    assert.equal(hex(request), c.token_request);
    const token = await finalizeToken(state, unhex(c.token_response));
    assert.equal(hex(token), c.token);
    assert.equal(deviceCredential(unhex(c.device_secret)), c.device_credential);
    assert.equal(authorizationHeader(token), c.authorization);
    const msg = unhex(c.message);
    assert.equal(hex(tokenFrames([[[token], msg]])), c.token_frames);
    assert.deepEqual(messageHead(msg), { collection: c.collection, reports: 1 });
    const bad = token.slice();
    bad[token.length - 1] ^= 1;
    assert.equal(await pssVerify(key, token.slice(0, 98), token.slice(98)), true);
    assert.equal(await pssVerify(key, bad.slice(0, 98), bad.slice(98)), false);
    await assert.rejects(finalizeToken(state, unhex(c.token_response).map((v, j) =>
      j === 0 ? v ^ 1 : v)));
  });
}
