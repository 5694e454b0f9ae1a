"""Privacy Pass redemption at a real gateway (LDP_GATEWAY_TOKENS=required) in front of
Apache Kafka, with a real issuer and Redis: good tokens pass once; forged, replayed,
truncated, wrong-key, wrong-challenge, cross-collection, cross-window, expired and fuzzed
tokens are refused with their own reason, and nothing of a refused request (nor any token)
reaches Kafka."""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.parse import token_frame
from ldpcore.collection import CollectionSpec, encode_message
from ldpcore.message import decode_message
from ldpstream.privacypass import scheme
from ldpstream.privacypass.client import IssuerClient, device_credential
from ldpstream.privacypass.tokens import (
    authorization_header,
    b64url_decode,
    begin_request,
    finalize_token,
)
from ldpstream.storage import CollectionCatalogue

from ..integration.helpers import read_topic
from ..issuer.conftest import IssuerProcess, issuer_env
from ..ldpstream.privacypass.local_issuer import self_issued_token
from .conftest import GatewayProcess, gateway_env, post

pytestmark = [pytest.mark.integration, pytest.mark.brokers("kafka")]

A = CollectionSpec.from_dict({"id": "tk-a", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                              "domain": {"kind": "integers", "low": 0, "high": 15},
                              "quota": {"reports_per_window": 50}})
B = CollectionSpec.from_dict({"id": "tk-b", "oracle": {"mechanism": "oue", "epsilon": 1.0},
                              "domain": {"kind": "integers", "low": 0, "high": 7},
                              "quota": {"reports_per_window": 50}})
SHORT = CollectionSpec.from_dict({"id": "tk-short", "window_seconds": 4,
                                  "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                  "domain": {"kind": "integers", "low": 0, "high": 3}})
FRESH = CollectionSpec.from_dict({"id": "tk-fresh", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                  "domain": {"kind": "integers", "low": 0, "high": 3}})
OCT, TFRAMES, JSON_T = ("application/octet-stream", "application/x-ldp-token-frames",
                        "application/json")


class Stack:
    def __init__(self, issuer: IssuerProcess, gateway: GatewayProcess, kafka: Any,
                 topic: str) -> None:
        self.issuer, self.gateway, self.kafka, self.topic = issuer, gateway, kafka, topic
        self.accepted = 0  # reports answered 202
        self.seen_tokens: list[bytes] = []

    def client(self) -> IssuerClient:
        return IssuerClient(self.issuer.url, device_credential(os.urandom(16)))

    def tokens(self, spec: CollectionSpec, n: int = 1, window: int | None = None) -> list[bytes]:
        c = self.client()
        w = c.window_now(spec.window_seconds) if window is None else window
        toks = c.tokens(spec.id, w, n)
        self.seen_tokens += toks
        return toks

    def post(self, body: bytes, ctype: str = OCT, token: bytes | None = None,
             ) -> tuple[int, Any]:
        headers = {} if token is None else {"Authorization": authorization_header(token)}
        status, _, data = post(self.gateway.port, body, ctype, headers)
        if status == 202:
            self.accepted += data["accepted_reports"]
        return status, data


def one(spec: CollectionSpec, seed: int = 0, n: int = 1) -> bytes:
    rng = np.random.default_rng(seed)
    return encode_message(spec, spec.oracle().perturb(rng.integers(0, spec.domain.size, n),
                                                      rng=rng))


@pytest.fixture(scope="module")
def stack(kafka: Any, redis_server: Any, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[Stack]:
    import redis

    names = {"prefix": f"tk{os.getpid()}:", "topic": f"tk-{os.getpid()}-{time.time_ns()}"}
    client = redis.Redis.from_url(redis_server.url)
    CollectionCatalogue(client, names["prefix"]).register_all([A, B, SHORT, FRESH])
    client.close()
    tmp = tmp_path_factory.mktemp("tokens")
    iss = IssuerProcess(issuer_env(redis_server, names, LDP_ISSUER_OPEN="true"),
                        tmp / "issuer.log").start()
    gw = GatewayProcess(gateway_env(kafka, redis_server, names, LDP_GATEWAY_TOKENS="required"),
                        tmp / "gateway.log").start()
    try:
        yield Stack(iss, gw, kafka, names["topic"])
    finally:
        gw.stop()
        iss.stop()


def test_a_good_token_passes_once_and_a_replay_is_refused(stack: Stack) -> None:
    (t,) = stack.tokens(A)
    msg = one(A)
    assert stack.post(msg, token=t)[0] == 202
    status, data = stack.post(one(A, 1), token=t)
    assert (status, data["reason"]) == (409, "token_replayed")
    status, headers, body = post(stack.gateway.port, msg, OCT)
    assert (status, body["reason"]) == (401, "token_missing")
    # RFC 9577 §2.1: the challenge and the issuer key of this collection's window
    www = headers["www-authenticate"]
    assert www.startswith("PrivateToken challenge=")
    fields = dict(p.strip().split("=", 1) for p in www[len("PrivateToken "):].split(","))
    w = scheme.window_of(time.time(), A.window_seconds)
    assert b64url_decode(fields["challenge"].strip('"')) == scheme.challenge(
        "ldpstream", A.id, w).encode()
    pk, spki = stack.client().key(A.id, w)
    assert b64url_decode(fields["token-key"].strip('"')) == spki


def test_each_bad_token_has_its_reason(stack: Stack) -> None:
    msg = one(A, 2)
    (t,) = stack.tokens(A)
    forged = t[:-1] + bytes([t[-1] ^ 1])
    truncated = t[:-10]
    nonce_swapped = t[:2] + os.urandom(32) + t[34:]
    # a token of a key the issuer never published
    own = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    w = scheme.window_of(time.time(), A.window_seconds)
    wrong_key = self_issued_token(own, scheme.challenge("ldpstream", A.id, w).encode())
    # the issuer's key of (A, w), but a challenge of another issuer name / collection / window
    c = stack.client()
    pk, spki = c.key(A.id, w)
    blinded = []
    for challenge in (scheme.challenge("someone-else", A.id, w),
                      scheme.challenge("ldpstream", B.id, w),
                      scheme.challenge("ldpstream", A.id, w + A.window_seconds)):
        r, s = begin_request(pk, challenge.encode(), spki=spki)
        blinded.append((r, s))
    import httpx
    resp = httpx.post(stack.issuer.url + "/token-request",
                      params={"collection": A.id, "window": w},
                      content=b"".join(r for r, _ in blinded),
                      headers={"Content-Type": "application/private-token-request",
                               "X-LDP-Device": device_credential(os.urandom(16))})
    assert resp.status_code == 200, resp.text
    other_issuer, other_coll, other_window = (
        finalize_token(pk, s, resp.content[i * 256:(i + 1) * 256])
        for i, (_, s) in enumerate(blinded))
    (b_token,) = stack.tokens(B)
    (next_window,) = stack.tokens(A, window=w + A.window_seconds)
    cases = [
        (forged, 403, "token_signature"),
        (nonce_swapped, 403, "token_signature"),
        (truncated, 400, "token_malformed"),
        (wrong_key, 403, "token_key"),
        (other_issuer, 403, "token_challenge"),
        (other_coll, 403, "token_collection"),
        (other_window, 403, "token_window"),
        (b_token, 403, "token_collection"),
        (next_window, 403, "token_window"),
    ]
    for token, status, reason in cases:
        got = stack.post(msg, token=token)
        assert (got[0], got[1]["reason"]) == (status, reason), (reason, got)
    # two reports, one token
    got = stack.post(one(A, 3, n=2), token=stack.tokens(A)[0])
    assert (got[0], got[1]["reason"]) == (400, "token_count")


def test_an_expired_key_is_refused(stack: Stack) -> None:
    from ldpstream.privacypass.client import IssuanceRefused

    for _ in range(5):  # a short window may end between choosing it and asking for it
        w = scheme.window_of(time.time(), SHORT.window_seconds)
        try:
            (t,) = stack.tokens(SHORT, window=w)
            break
        except IssuanceRefused:
            continue
    end = w + SHORT.window_seconds
    time.sleep(max(0.0, end - time.time()) + 0.3)
    got = stack.post(one(SHORT), token=t)
    assert (got[0], got[1]["reason"]) == (403, "token_key_expired")


def test_a_relay_posts_many_devices_in_one_body_all_or_nothing(stack: Stack) -> None:
    toks = stack.tokens(A, 20)
    items = [([t], one(A, 10 + i)) for i, t in enumerate(toks[:10])]
    assert stack.post(token_frame(items), TFRAMES)[0] == 202
    # one replayed token among fresh ones refuses the whole body, and spends none of them
    fresh = [([t], one(A, 30 + i)) for i, t in enumerate(toks[10:19])]
    got = stack.post(token_frame(fresh + [items[3]]), TFRAMES)
    assert (got[0], got[1]["reason"], got[1]["index"]) == (409, "token_replayed", 9)
    assert stack.post(token_frame(fresh), TFRAMES)[0] == 202
    # JSON messages carry theirs as base64url
    obj = json.loads(encode_message(A, A.oracle().perturb([1], rng=1), "json"))
    obj["tokens"] = [base64.urlsafe_b64encode(toks[19]).decode().rstrip("=")]
    assert stack.post(json.dumps([obj]).encode(), JSON_T)[0] == 202
    assert stack.post(json.dumps([obj]).encode(), JSON_T)[1]["reason"] == "token_replayed"


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzzed_tokens_are_refused(stack: Stack, data: st.DataObject) -> None:
    if not hasattr(stack, "fuzz_base"):
        stack.fuzz_base = stack.tokens(A)[0]  # type: ignore[attr-defined]
    base: bytes = stack.fuzz_base  # type: ignore[attr-defined]
    kind = data.draw(st.sampled_from(["random", "flip", "cut", "extend"]))
    if kind == "random":
        tok = data.draw(st.binary(min_size=0, max_size=400))
    elif kind == "flip":
        at = data.draw(st.integers(2, len(base) - 1))
        tok = base[:at] + bytes([base[at] ^ data.draw(st.integers(1, 255))]) + base[at + 1:]
    elif kind == "cut":
        tok = base[:data.draw(st.integers(0, len(base) - 1))]
    else:
        tok = base + data.draw(st.binary(min_size=1, max_size=8))
    status, body = stack.post(one(A, 99), token=tok)
    assert 400 <= status < 500 and body["reason"].startswith("token_"), (status, body)


def test_optional_mode_keeps_tokenless_reports_and_still_checks_tokens(
        stack: Stack, kafka: Any, redis_server: Any,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    # a trusted relay's gateway: no token needed, but a token that comes is verified
    prefix = stack.issuer.env["LDP_REDIS_PREFIX"]
    gw = GatewayProcess(gateway_env(kafka, redis_server, {"prefix": prefix,
                                                          "topic": stack.topic},
                                    LDP_GATEWAY_TOKENS="optional"),
                        tmp_path_factory.mktemp("optional") / "gateway.log").start()
    try:
        def send(token: bytes | None) -> tuple[int, Any]:
            headers = {} if token is None else {"Authorization": authorization_header(token)}
            status, _, body = post(gw.port, one(A, 5), OCT, headers)
            if status == 202:
                stack.accepted += body["accepted_reports"]
            return status, body

        assert send(None)[0] == 202
        (t,) = stack.tokens(A)
        assert send(t[:-1] + bytes([t[-1] ^ 1]))[1]["reason"] == "token_signature"
        assert send(t)[0] == 202
        assert send(t)[1]["reason"] == "token_replayed"
    finally:
        gw.stop()


def test_a_bad_tokens_mode_stops_the_gateway_naming_the_variable() -> None:
    from gateway.config import GatewaySettings
    from ldpstream.settings import ConfigError

    with pytest.raises(ConfigError, match="LDP_GATEWAY_TOKENS"):
        GatewaySettings.from_env({"LDP_GATEWAY_TOKENS": "sometimes"})
    assert GatewaySettings.from_env({}).tokens == "off"


def test_nothing_refused_and_no_token_reaches_kafka(stack: Stack) -> None:
    # runs last in the module: every report in the topic is one answered 202
    records = read_topic(stack.kafka.bootstrap, stack.topic, 1)
    total = 0
    specs = {A.id: A, B.id: B, SHORT.id: SHORT}
    needles = [t[2:34] for t in stack.seen_tokens] + [t[-32:] for t in stack.seen_tokens]
    for rec in records:
        spec = specs[rec.key.decode()]
        _, reports = decode_message(spec, spec.oracle(), rec.value)
        total += len(reports)
        assert not any(n in rec.value for n in needles)
        assert not any(n in b"".join(v for _, v in (rec.headers or [])) for n in needles)
    assert total == stack.accepted > 0


def test_a_key_published_just_after_the_gateway_read_the_keys_is_not_refused(
        stack: Stack) -> None:
    # an unknown key makes the gateway read every collection's keys (FRESH has none yet)
    own = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    w = scheme.window_of(time.time(), A.window_seconds)
    unknown = self_issued_token(own, scheme.challenge("ldpstream", A.id, w).encode())
    assert stack.post(one(A), token=unknown)[1]["reason"] == "token_key"
    # FRESH's first key is published now, within a second of that read: its token is
    # good, whatever the gateway read before (it reads again rather than refuse it)
    (t,) = stack.tokens(FRESH)
    got = stack.post(one(FRESH), token=t)
    assert got[0] == 202, got
