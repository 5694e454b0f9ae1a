"""Generate the shared Privacy Pass vectors (``sdks/vectors/privacypass/tokens.json``).

Each case fixes an issuer key (RFC 9578 A.2 vector 1's, PKCS#8 PEM and its n, e), a
(collection, window, issuer name), the nonce, PSS salt and blind ``r``; it holds what a
device must compute: the TokenChallenge, the TokenRequest (hex), the issuer's TokenResponse,
the Token, the device credential of a secret, and the three ways a token rides with a
report (the ``Authorization`` header, an ``application/x-ldp-token-frames`` body, a JSON
message with ``tokens``).  Format: docs/privacy-pass.md, docs/wire-format.md.

``python sdks/vectors/privacypass/generate.py`` rewrites the file (``--check`` compares);
``tests/sdks/test_privacypass_vectors.py`` runs the check.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from ldpcore.collection import CollectionSpec
from ldpcore.message import encode_message, token_frame
from ldpstream.dev.generated import write_or_check
from ldpstream.privacypass import scheme
from ldpstream.privacypass.client import device_credential
from ldpstream.privacypass.tokens import (
    TokenRequest,
    authorization_header,
    b64url,
    begin_request,
    finalize_token,
    issue,
    spki_der,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
OUT = HERE / "tokens.json"


def _key() -> tuple[str, rsa.RSAPrivateKey]:
    rfc = json.loads((ROOT / "tests/ldpstream/vectors/rfc9578.json").read_text())
    pem = bytes.fromhex(rfc[0]["skS"])
    sk = serialization.load_pem_private_key(pem, password=None)
    assert isinstance(sk, rsa.RSAPrivateKey)
    return pem.decode(), sk


def cases() -> list[dict[str, Any]]:
    pem, sk = _key()
    pk = sk.public_key()
    spki = spki_der(pk)
    nums = pk.public_numbers()
    spec = CollectionSpec.from_dict({"id": "os", "oracle": {"mechanism": "grr",
                                                            "epsilon": 1.0},
                                     "domain": {"kind": "categories",
                                                "labels": ["linux", "mac", "win"]},
                                     "quota": {"reports_per_window": 2}})
    o = spec.oracle()
    out = []
    for i, (issuer, window) in enumerate((("ldpstream", 1_700_000_000 - 1_700_000_000 % 3600),
                                          ("issuer.example", 7200))):
        nonce = bytes((i * 7 + j) % 256 for j in range(32))
        salt = bytes((i * 11 + 3 * j) % 256 for j in range(48))
        r = int.from_bytes(bytes((i + 5 + 13 * j) % 256 for j in range(255)), "big") | 1
        ch = scheme.challenge(issuer, spec.id, window)
        req, state = begin_request(pk, ch.encode(), spki=spki, nonce=nonce, salt=salt, r=r)
        resp = issue(sk, TokenRequest.decode(req))
        token = finalize_token(pk, state, resp)
        import numpy as np

        reports = o.perturb(np.array([i % 3]), rng=i)
        msg = encode_message(spec, reports)
        jmsg = json.loads(encode_message(spec, reports, "json"))
        jmsg["tokens"] = [b64url(token)]
        secret = bytes(range(i, i + 16))
        out.append({
            "issuer_name": issuer, "collection": spec.id, "window": window,
            "collection_spec": json.loads(spec.to_json()),
            "sk_pem": pem, "n": f"{nums.n:x}", "e": nums.e,
            "token_key": b64url(spki, pad=True), "token_key_id": state.token_key_id.hex(),
            "redemption_context": scheme.redemption_context(spec.id, window).hex(),
            "token_challenge": ch.encode().hex(), "challenge_digest": ch.digest().hex(),
            "nonce": nonce.hex(), "salt": salt.hex(), "blind": f"{r:x}",
            "token_request": req.hex(), "token_response": resp.hex(), "token": token.hex(),
            "device_secret": secret.hex(), "device_credential": device_credential(secret),
            "message": msg.hex(),
            "authorization": authorization_header(token),
            "token_frames": token_frame([([token], msg)]).hex(),
            "json_message": json.dumps(jmsg, separators=(",", ":")),
        })
    return out


def main(argv: list[str]) -> int:
    text = json.dumps({"format": "ldpstream-privacypass-vectors", "version": 1,
                       "cases": cases()}, indent=1) + "\n"
    return write_or_check({OUT: text}, check="--check" in argv,
                          command=f"python {Path(__file__).relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
