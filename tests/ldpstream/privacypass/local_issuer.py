"""The whole issuance run in the test's process: a token a device would get from an issuer
holding ``sk`` (the Privacy Pass tests here, and the gateway's tests of a key no issuer
published)."""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric import rsa

from ldpstream.privacypass.tokens import TokenRequest, begin_request, finalize_token, issue


def self_issued_token(sk: rsa.RSAPrivateKey, challenge: bytes) -> bytes:
    """The device blinds a request for ``challenge``, ``sk`` signs it as the issuer does,
    the device finalises the token."""
    pk = sk.public_key()
    req, state = begin_request(pk, challenge)
    return finalize_token(pk, state, issue(sk, TokenRequest.decode(req)))
