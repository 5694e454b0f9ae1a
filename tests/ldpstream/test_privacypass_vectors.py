"""RFC 9474 (blind RSA) and RFC 9578 (token type 2) against their published test vectors.

The vectors (tests/ldpstream/vectors/) are RFC 9474 Appendix A and RFC 9578 Appendix A.2,
read from the RFC sources: every intermediate value is checked, not only the end result.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from ldpstream.privacypass import blindrsa
from ldpstream.privacypass.tokens import (
    NK,
    Token,
    TokenChallenge,
    TokenRequest,
    begin_request,
    finalize_token,
    issue,
    public_key_from_spki,
    spki_der,
    token_key_id,
    verify_token,
)

HERE = Path(__file__).parent / "vectors"
RFC9474 = json.loads((HERE / "rfc9474.json").read_text())
RFC9578 = json.loads((HERE / "rfc9578.json").read_text())


def _h(s: str) -> bytes:
    return bytes.fromhex(s)


def _i(s: str) -> int:
    return int(s, 16)


def _key(v: dict[str, str]) -> rsa.RSAPrivateKey:
    p, q, d, e, n = _i(v["p"]), _i(v["q"]), _i(v["d"]), _i(v["e"]), _i(v["n"])
    assert p * q == n
    nums = rsa.RSAPrivateNumbers(p, q, d, rsa.rsa_crt_dmp1(d, p), rsa.rsa_crt_dmq1(d, q),
                                 rsa.rsa_crt_iqmp(p, q), rsa.RSAPublicNumbers(e, n))
    return nums.private_key()


def test_the_four_rfc9474_variants_are_all_here() -> None:
    assert {v["name"] for v in RFC9474} == set(blindrsa.VARIANTS)


@pytest.mark.parametrize("vec", RFC9474, ids=[v["name"] for v in RFC9474])
def test_rfc9474_vector_every_step(vec: dict[str, str]) -> None:
    variant = blindrsa.VARIANTS[vec["name"]]
    sk = _key(vec)
    pk = sk.public_key()
    n = pk.public_numbers().n
    msg, prefix = _h(vec["msg"]), _h(vec["msg_prefix"])
    prepared = blindrsa.prepare(msg, variant, prefix=prefix or None)
    assert prepared == _h(vec["prepared_msg"])
    salt = _h(vec["salt"])
    assert blindrsa.emsa_pss_encode(prepared, n.bit_length() - 1, salt) == _h(vec["encoded_msg"])
    r = pow(_i(vec["inv"]), -1, n)
    blinded, inv = blindrsa.blind(pk, prepared, variant, salt=salt, r=r)
    assert blinded == _h(vec["blinded_msg"])
    assert inv == _h(vec["inv"])
    blind_sig = blindrsa.blind_sign(sk, blinded)
    assert blind_sig == _h(vec["blind_sig"])
    sig = blindrsa.finalize(pk, prepared, blind_sig, inv, variant)
    assert sig == _h(vec["sig"])
    assert blindrsa.verify(pk, prepared, sig, variant)
    assert not blindrsa.verify(pk, prepared + b"x", sig, variant)


def test_rfc9474_finalize_refuses_a_wrong_blind_signature() -> None:
    vec = next(v for v in RFC9474 if v["name"] == "RSABSSA-SHA384-PSS-Deterministic")
    pk = _key(vec).public_key()
    bad = bytearray(_h(vec["blind_sig"]))
    bad[-1] ^= 1
    with pytest.raises(blindrsa.BlindRSAError):
        blindrsa.finalize(pk, _h(vec["prepared_msg"]), bytes(bad), _h(vec["inv"]),
                          blindrsa.RSABSSA_SHA384_PSS_DETERMINISTIC)


def test_rfc9474_fresh_blinds_give_different_requests_for_one_message() -> None:
    # blindness: the signer sees a new uniformly random value each time
    sk = _key(RFC9474[2])
    pk = sk.public_key()
    v = blindrsa.RSABSSA_SHA384_PSS_DETERMINISTIC
    (a, ia), (b, ib) = blindrsa.blind(pk, b"m", v), blindrsa.blind(pk, b"m", v)
    assert a != b
    sa = blindrsa.finalize(pk, b"m", blindrsa.blind_sign(sk, a), ia, v)
    sb = blindrsa.finalize(pk, b"m", blindrsa.blind_sign(sk, b), ib, v)
    assert blindrsa.verify(pk, b"m", sa, v) and blindrsa.verify(pk, b"m", sb, v)


@pytest.mark.parametrize("i", range(len(RFC9578)))
def test_rfc9578_token_type2_vector(i: int) -> None:
    vec = RFC9578[i]
    sk = serialization.load_pem_private_key(_h(vec["skS"]), password=None)
    assert isinstance(sk, rsa.RSAPrivateKey)
    pk = sk.public_key()
    spki = spki_der(pk)
    assert spki == _h(vec["pkS"])  # the RSASSA-PSS SPKI, byte for byte
    assert public_key_from_spki(spki).public_numbers() == pk.public_numbers()
    challenge = _h(vec["token_challenge"])
    assert TokenChallenge.decode(challenge).encode() == challenge
    n = pk.public_numbers().n
    # "blind" is the blinding factor r of RFC 9474 §4.2 (inv = r⁻¹)
    request, state = begin_request(pk, challenge, nonce=_h(vec["nonce"]),
                                   salt=_h(vec["salt"]), r=_i(vec["blind"]) % n)
    assert request == _h(vec["token_request"])
    response = issue(sk, TokenRequest.decode(request))
    assert response == _h(vec["token_response"])
    token = finalize_token(pk, state, response)
    assert token == _h(vec["token"])
    tok = Token.decode(token)
    assert tok.token_key_id == token_key_id(spki)
    assert verify_token(pk, tok)
    assert len(tok.authenticator) == NK
