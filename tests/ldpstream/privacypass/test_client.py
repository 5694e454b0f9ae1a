"""ldpstream.privacypass.client: the device's issuer client and token wallet, against an
in-process issuer blind-signing with the shared vectors' key (the real issuer:
tests/issuer/test_app.py)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from ldpstream.privacypass.client import (
    IssuanceRefused,
    IssuerClient,
    TokenWallet,
    device_credential,
)
from ldpstream.privacypass.tokens import Token, b64url, verify_token

from ...producer.standins import T0, WS, Issuer

SPEC = SimpleNamespace(id="qt", reports_per_window=3, token_quota=3, window_seconds=WS)


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    iss = Issuer([T0, T0 + WS])
    try:
        yield iss
    finally:
        iss.close()


def test_the_credential_is_a_one_way_hmac_of_the_secret() -> None:
    secret = bytes(range(16))
    want = hmac.new(secret, b"ldpstream issuer credential v1", hashlib.sha256).digest()
    assert device_credential(secret) == b64url(want)
    assert device_credential(secret) != device_credential(bytes(16))


def test_tokens_from_the_issuer_verify_for_their_collection_and_window(issuer: Issuer) -> None:
    client = IssuerClient(issuer.url, credential="c")
    tokens = client.tokens("qt", T0, 2)
    assert len(tokens) == 2 and client.issuer_name == "ldpstream"
    pk, _ = client.key("qt", T0)
    for raw in tokens:
        tok = Token.decode(raw)
        assert verify_token(pk, tok)
    assert client.window_now(WS, now=T0 + 5) == T0


def test_a_window_without_a_key_is_refused_without_asking_for_tokens(issuer: Issuer) -> None:
    client = IssuerClient(issuer.url, credential="c")
    with pytest.raises(IssuanceRefused) as err:
        client.tokens("qt", T0 + 7 * WS, 1)
    assert (err.value.status, err.value.reason) == (404, "no_key")
    assert issuer.asked == []


def test_the_wallet_gets_the_windows_quota_once_and_forgets_past_windows(
        issuer: Issuer) -> None:
    wallet = TokenWallet(IssuerClient(issuer.url, credential="c"))
    first = wallet.take(SPEC, 1, T0)
    assert len(first) == 1 and issuer.asked == [T0]  # 3 obtained at once, 1 spent
    assert len(wallet.take(SPEC, 2, T0)) == 2 and issuer.asked == [T0]
    wallet.take(SPEC, 1, T0 + WS)
    assert ("qt", T0) in wallet.tokens  # the previous window is kept one window more
    assert wallet.take_for("qt", T0 + WS) and issuer.asked == [T0, T0 + WS]
