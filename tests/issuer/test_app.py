"""``ldpstream issuer`` as a child process on a real Redis: the RFC 9578 directory, tokens
that verify, the quota per device and window (kept across a restart), attestation and
every refusal with its reason."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from ldpcore.collection import CollectionSpec
from ldpstream.privacypass import scheme
from ldpstream.privacypass.client import IssuanceRefused, IssuerClient, device_credential
from ldpstream.privacypass.tokens import (
    TOKEN_REQUEST_LEN,
    Token,
    begin_request,
    public_key_from_spki,
    token_key_id,
    verify_token,
)

from .conftest import IssuerProcess, issuer_env, register

pytestmark = pytest.mark.integration

SPEC = CollectionSpec.from_dict({"id": "pp-os", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                 "domain": {"kind": "categories", "labels": ["a", "b", "c"]},
                                 "quota": {"reports_per_window": 2}})
FLEET_KEY = "fleet-secret-key-1"


@pytest.fixture
def issuer(redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
           tmp_path: Path) -> Any:
    register(redis_client, ldp_names["prefix"], SPEC)
    proc = IssuerProcess(issuer_env(redis_server, ldp_names,
                                    LDP_ISSUER_KEYS=f"app:{FLEET_KEY}"),
                         tmp_path / "issuer.log").start()
    try:
        yield proc
    finally:
        proc.stop()


def _client(url: str, secret: bytes = b"device-secret-0001") -> IssuerClient:
    return IssuerClient(url, device_credential(secret), fleet_key=FLEET_KEY)


def test_directory_is_rfc9578_and_keys_are_per_collection_and_window(issuer: Any) -> None:
    r = httpx.get(issuer.url + scheme_dir(), params={"collection": SPEC.id})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/private-token-issuer-directory")
    assert "max-age" in r.headers["cache-control"]
    doc = r.json()
    assert doc["issuer-request-uri"] == "/token-request"
    keys = doc["token-keys"]
    assert [k["ldp-window"] for k in keys][0] == scheme.window_of(__import__("time").time(),
                                                                  SPEC.window_seconds)
    assert len(keys) == 2  # the current and the next window
    assert len({k["token-key"] for k in keys}) == 2
    for k in keys:
        assert k["token-type"] == 2 and k["ldp-collection"] == SPEC.id
        spki = base64.urlsafe_b64decode(k["token-key"])  # padded base64url
        assert spki[6:17] == bytes.fromhex("06092a864886f70d01010a")  # id-RSASSA-PSS
        assert public_key_from_spki(spki).key_size == 2048
    again = httpx.get(issuer.url + scheme_dir()).json()["token-keys"]
    assert {k["token-key"] for k in again} == {k["token-key"] for k in keys}


def scheme_dir() -> str:
    return "/.well-known/private-token-issuer-directory"


def test_tokens_verify_and_the_quota_holds_across_a_restart(
        issuer: Any, redis_server: Any, ldp_names: dict[str, str], tmp_path: Path) -> None:
    client = _client(issuer.url)
    w = client.window_now(SPEC.window_seconds)
    tokens = client.tokens(SPEC.id, w, 2)
    pk, spki = client.key(SPEC.id, w)
    ch = scheme.challenge("ldpstream", SPEC.id, w)
    for t in tokens:
        tok = Token.decode(t)
        assert verify_token(pk, tok)
        assert tok.challenge_digest == ch.digest() and tok.token_key_id == token_key_id(spki)
    assert len({Token.decode(t).nonce for t in tokens}) == 2
    with pytest.raises(IssuanceRefused) as exc:
        client.tokens(SPEC.id, w, 1)
    assert (exc.value.status, exc.value.reason) == (429, "quota")
    # another device has its own quota; the next window is a new one
    assert len(_client(issuer.url, b"device-secret-0002").tokens(SPEC.id, w, 2)) == 2
    assert len(client.tokens(SPEC.id, w + SPEC.window_seconds, 1)) == 1
    issuer.stop()
    again = IssuerProcess(issuer_env(redis_server, ldp_names,
                                     LDP_ISSUER_KEYS=f"app:{FLEET_KEY}"),
                          tmp_path / "issuer2.log").start()
    try:
        fresh = _client(again.url)
        with pytest.raises(IssuanceRefused) as exc:
            fresh.tokens(SPEC.id, w, 1)
        assert exc.value.reason == "quota"
        assert fresh.key(SPEC.id, w)[1] == spki  # the same key after the restart
        assert len(fresh.tokens(SPEC.id, w + SPEC.window_seconds, 1)) == 1
        with pytest.raises(IssuanceRefused):
            fresh.tokens(SPEC.id, w + SPEC.window_seconds, 1)
    finally:
        again.stop()


def _post(issuer: Any, body: bytes, headers: dict[str, str] | None = None,
          **params: Any) -> httpx.Response:
    h = {"Content-Type": "application/private-token-request",
         "Authorization": f"Bearer {FLEET_KEY}",
         "X-LDP-Device": device_credential(os.urandom(16))}
    h.update(headers or {})
    return httpx.post(issuer.url + "/token-request", content=body, headers=h,
                      params={"collection": SPEC.id, **params})


def test_every_refusal_has_its_status_and_reason(issuer: Any) -> None:
    client = _client(issuer.url)
    w = client.window_now(SPEC.window_seconds)
    pk, spki = client.key(SPEC.id, w)
    req, _ = begin_request(pk, scheme.challenge("ldpstream", SPEC.id, w).encode(), spki=spki)
    cases = [
        (_post(issuer, req, {"Authorization": ""}), 401, "missing_key"),
        (_post(issuer, req, {"Authorization": "Bearer nope"}), 403, "wrong_key"),
        (_post(issuer, req, {"X-LDP-Device": ""}), 401, "missing_device"),
        (_post(issuer, req, {"X-LDP-Device": "!!"}), 400, "bad_device"),
        (_post(issuer, req, {"Content-Type": "application/json"}), 415, "media_type"),
        (_post(issuer, req[:-1]), 400, "malformed"),
        (_post(issuer, b""), 400, "malformed"),
        (_post(issuer, req * 3), 400, "too_many"),
        (_post(issuer, req[:2] + bytes([req[2] ^ 1]) + req[3:]), 400, "token_key"),
        (_post(issuer, b"\x00\x01" + req[2:]), 400, "malformed"),
        (_post(issuer, req, window=w + 10 * SPEC.window_seconds), 400, "window"),
        (_post(issuer, req, collection="nope"), 404, "unknown_collection"),
        (_post(issuer, req, window="soon"), 400, "bad_request"),
    ]
    for resp, status, reason in cases:
        assert (resp.status_code, resp.json()["reason"]) == (status, reason), resp.text
    ok = _post(issuer, req)
    assert ok.status_code == 200 and len(ok.content) == 256
    assert ok.headers["content-type"] == "application/private-token-response"
    assert len(req) == TOKEN_REQUEST_LEN
    metrics = httpx.get(issuer.url + "/metrics").text
    assert 'ldp_issuer_refused_total{reason="quota"}' in metrics or "ldp_issuer_refused" in metrics
    assert httpx.get(issuer.url + "/readyz").json()["redis"] is True


def test_issuer_refuses_to_start_open_without_saying_so(redis_server: Any,
                                                        ldp_names: dict[str, str],
                                                        tmp_path: Path) -> None:
    proc = IssuerProcess(issuer_env(redis_server, ldp_names), tmp_path / "i.log")
    proc.spawn()
    assert proc.proc is not None
    assert proc.proc.wait(60) == 2
    assert "LDP_ISSUER_KEYS" in proc.output()
