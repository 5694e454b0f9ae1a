"""Privacy Pass structures: round trips, the (collection, window) binding, and parsers of
outside input that refuse garbage with TokenError and nothing else."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpcore.collection import CollectionSpec
from ldpcore.errors import ParameterError
from ldpstream.privacypass import scheme
from ldpstream.privacypass.tokens import (
    TOKEN_LEN,
    Token,
    TokenChallenge,
    TokenError,
    TokenRequest,
    authorization_header,
    b64url_decode,
    parse_private_token_auth,
    public_key_from_spki,
    spki_der,
    verify_token,
)

from .local_issuer import self_issued_token


@pytest.fixture(scope="module")
def key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def test_token_round_trip_and_tampering(key: rsa.RSAPrivateKey) -> None:
    pk = key.public_key()
    token = self_issued_token(key, scheme.challenge("ldpstream", "os", 3600).encode())
    tok = Token.decode(token)
    assert verify_token(pk, tok)
    assert tok.challenge_digest == scheme.challenge("ldpstream", "os", 3600).digest()
    for at in (5, 40, 70, 200, TOKEN_LEN - 1):  # nonce, digest, key id, authenticator
        bad = bytearray(token)
        bad[at] ^= 0x40
        assert not verify_token(pk, Token.decode(bytes(bad)))
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    assert not verify_token(other, tok)


def test_challenge_binds_collection_and_window() -> None:
    a = scheme.challenge("ldpstream", "os", 3600).digest()
    assert a != scheme.challenge("ldpstream", "os", 7200).digest()
    assert a != scheme.challenge("ldpstream", "os2", 3600).digest()
    assert a != scheme.challenge("other", "os", 3600).digest()
    ch = scheme.challenge("ldpstream", "os", 3600)
    assert TokenChallenge.decode(ch.encode()) == ch
    assert scheme.window_of(7199.9, 3600) == 3600


def test_authorization_header_round_trip(key: rsa.RSAPrivateKey) -> None:
    token = bytes(range(256)) + bytes(98)
    assert parse_private_token_auth(authorization_header(token)) == token
    assert parse_private_token_auth("privatetoken token=AAEC") == b"\x00\x01\x02"
    assert parse_private_token_auth("Bearer abc") is None
    with pytest.raises(TokenError):
        parse_private_token_auth('PrivateToken token="a", token="b"')


def test_spki_round_trip_and_refusals(key: rsa.RSAPrivateKey) -> None:
    der = spki_der(key.public_key())
    assert public_key_from_spki(der).public_numbers() == key.public_key().public_numbers()
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    with pytest.raises(TokenError):
        public_key_from_spki(spki_der(small.public_key()))
    with pytest.raises(TokenError):
        public_key_from_spki(der[:-1])


def test_collection_quota_is_declared_outside_the_fingerprint() -> None:
    base = {"id": "os", "oracle": {"mechanism": "grr", "epsilon": 1.0},
            "domain": {"kind": "categories", "labels": ["a", "b"]}}
    plain = CollectionSpec.from_dict(base)
    quota = CollectionSpec.from_dict({**base, "quota": {"reports_per_window": 3}})
    assert plain.fingerprint == quota.fingerprint
    assert quota.token_quota == 3 and plain.token_quota == 1
    again = CollectionSpec.from_dict(json.loads(quota.to_json()))
    assert again.quota == 3
    cadence = CollectionSpec.from_dict({**base, "reports_per_window": 4})
    assert cadence.token_quota == 4
    for bad in ({"reports_per_window": 0}, {"reports_per_window": True}, {"k": 1}, 3):
        with pytest.raises(ParameterError, match="quota"):
            CollectionSpec.from_dict({**base, "quota": bad})


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_fuzzed_token_bytes_are_refused_with_token_error_only(data: bytes) -> None:
    for parse in (Token.decode, TokenRequest.decode, TokenChallenge.decode, b64url_decode,
                  public_key_from_spki):
        try:
            parse(data)
        except TokenError:
            pass


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=600))
def test_fuzzed_authorization_headers_are_refused_with_token_error_only(text: str) -> None:
    try:
        parse_private_token_auth(text)
    except TokenError:
        pass
