"""The token gate in process, on a real Redis: a relay's uniform token frames body is read
as one merged message (numpy, no per-frame Python), and every answer of the gate — which
request passes, which is refused, with what reason and at which frame — is the same on
that path as on the frame-by-frame one, with either RSASSA-PSS backend; the spend
script keeps each token until its own window's end."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import rsa

import gateway.parse as parse
from gateway.batcher import Request, validate_requests
from gateway.parse import TOKEN_FRAMES, BodyError, Catalogue, parse_body, token_frame
from gateway.tokens import TokenGate
from ldpcore.collection import CollectionSpec, encode_message
from ldpcore.message import decode_message
from ldpstream.privacypass import scheme
from ldpstream.privacypass.tokens import VARIANT, spki_der, token_key_id

pytestmark = pytest.mark.integration

A = CollectionSpec.from_dict({"id": "tg-a", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                              "domain": {"kind": "integers", "low": 0, "high": 15}})
B = CollectionSpec.from_dict({"id": "tg-b", "window_seconds": 600,
                              "oracle": {"mechanism": "grr", "epsilon": 1.0},
                              "domain": {"kind": "integers", "low": 0, "high": 15}})
SPECS = {A.id: A, B.id: B}
SKEW = 30


class Issuer:
    """One key per collection's current window, published as the issuer would."""

    def __init__(self, redis_url: str, prefix: str) -> None:
        import redis

        self.keys: dict[str, tuple[rsa.RSAPrivateKey, bytes, bytes, int]] = {}
        rds = redis.Redis.from_url(redis_url)
        for spec in SPECS.values():
            sk = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            w = scheme.window_of(time.time(), spec.window_seconds)
            rec = scheme.KeyRecord.of(spec.id, w, spec.window_seconds, spki_der(sk.public_key()))
            rds.set(scheme.PPKeys(prefix).public(spec.id, w), rec.to_json())
            digest = scheme.challenge(scheme.DEFAULT_ISSUER_NAME, spec.id, w).digest()
            self.keys[spec.id] = (sk, token_key_id(rec.spki), digest, rec.end)
        rds.close()

    def token(self, cid: str, *, digest: bytes | None = None) -> bytes:
        sk, kid, own, _ = self.keys[cid]
        tin = b"\x00\x02" + os.urandom(32) + (own if digest is None else digest) + kid
        return tin + sk.sign(tin, VARIANT.pss, hashes.SHA384())


@pytest.fixture(scope="module")
def setup(redis_server: Any) -> Iterator[tuple[str, str, Issuer]]:
    prefix = f"tg{os.getpid()}:"
    yield redis_server.url, prefix, Issuer(redis_server.url, prefix)


def _gate(redis_url: str, prefix: str, verifier: str) -> TokenGate:
    import redis.asyncio as aioredis

    return TokenGate(aioredis.Redis.from_url(redis_url), prefix, mode="required",
                     issuer_name=scheme.DEFAULT_ISSUER_NAME, skew=SKEW,
                     window_seconds=lambda c: SPECS[c].window_seconds if c in SPECS else None,
                     collection_ids=lambda: list(SPECS), verifier=verifier)


def _message(spec: CollectionSpec, value: int, seed: int) -> bytes:
    return encode_message(spec, spec.oracle().perturb([value], rng=seed))


def _run(gate: TokenGate, bodies: list[bytes]) -> list[tuple[str, int | None] | None]:
    """Each body through parse → validate → redeem as one batch: None (accepted) or the
    (reason, index) of its refusal."""
    cat = Catalogue(SPECS.values())

    async def go() -> list[tuple[str, int | None] | None]:
        reqs = []
        out: list[tuple[str, int | None] | None] = []
        for b in bodies:
            try:
                reqs.append(Request(lambda _: None, parse_body(TOKEN_FRAMES, b, cat), len(b)))
            except BodyError as exc:
                reqs.append(Request(lambda _: None, [], len(b)))
                reqs[-1].error = exc
        validate_requests([r for r in reqs if r.error is None])
        await gate.redeem(reqs, int(time.time() * 1000))
        for r in reqs:
            out.append(None if r.error is None else (r.error.reason, r.error.index))
        await gate.redis.aclose()
        return out

    return asyncio.run(go())


def test_a_uniform_token_frames_body_is_one_merged_message(setup: Any) -> None:
    _, _, issuer = setup
    toks = [issuer.token(A.id) for _ in range(12)]
    msgs = [_message(A, i % 16, i) for i in range(12)]
    (m,) = parse_body(TOKEN_FRAMES, token_frame([([t], msg) for t, msg in zip(toks, msgs,
                                                                           strict=True)]),
                      Catalogue([A]))
    assert (m.messages, m.n, m.tokens, m.token_frames) == (12, 12, toks, True)
    assert m.raw is not None
    _, merged = decode_message(A, A.oracle(), m.raw)
    one_by_one = [decode_message(A, A.oracle(), msg)[1] for msg in msgs]
    for col in merged.columns:
        assert np.array_equal(merged.columns[col],
                              np.concatenate([r.columns[col] for r in one_by_one]))
    # fewer than UNIFORM_MIN frames, two reports for one token, or two collections: one by one
    few = token_frame([([t], msg) for t, msg in zip(toks[:3], msgs[:3], strict=True)])
    assert len(parse_body(TOKEN_FRAMES, few, Catalogue([A]))) == 3
    mixed = token_frame([([t], msg) for t, msg in zip(toks, msgs[:11] + [_message(B, 1, 1)],
                                                      strict=True)])
    assert len(parse_body(TOKEN_FRAMES, mixed, Catalogue(SPECS.values()))) == 12


SCENARIOS = ["good", "forged", "unknown_key", "type", "wrong_collection", "wrong_challenge",
             "bad_value", "replayed", "two_tokens"]


@pytest.mark.parametrize("verifier", ["gmpy2", "openssl"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_merged_and_frame_by_frame_give_the_same_answers(setup: Any, scenario: str,
                                                         verifier: str,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    redis_url, prefix, issuer = setup
    at = 7  # the frame at fault, of 10

    def body() -> tuple[bytes, list[bytes]]:
        items = [([issuer.token(A.id)], _message(A, i, i)) for i in range(10)]
        toks, msg = items[at]
        t = toks[0]
        if scenario == "forged":
            toks[0] = t[:-1] + bytes([t[-1] ^ 1])
        elif scenario == "unknown_key":
            toks[0] = t[:66] + os.urandom(32) + t[98:]
        elif scenario == "type":
            toks[0] = b"\x00\x03" + t[2:]
        elif scenario == "wrong_collection":
            toks[0] = issuer.token(B.id)
        elif scenario == "wrong_challenge":
            toks[0] = issuer.token(A.id, digest=os.urandom(32))
        elif scenario == "bad_value":  # GRR over 0..15: 200 is not a report
            items[at] = (toks, msg[:-1] + bytes([200]))
        elif scenario == "two_tokens":
            items[at] = ([t, issuer.token(A.id)], msg)
        return token_frame(items), [x for ts, _ in items for x in ts]

    answers = []
    for merged in (True, False):
        if not merged:
            monkeypatch.setattr(parse, "_uniform_token_frames", lambda body, cat: None)
        gate = _gate(redis_url, prefix, verifier)
        b, toks = body()
        if scenario == "replayed":  # spend the token of frame `at` first
            first = token_frame([([toks[at]], _message(A, 1, 1))])
            assert _run(_gate(redis_url, prefix, verifier), [first]) == [None]
        cat = Catalogue(SPECS.values())
        n = len(parse_body(TOKEN_FRAMES, b, cat))
        # the merged path only takes bodies it can: a bad type or a count mismatch go one by one
        expect_merged = merged and scenario not in ("type", "two_tokens")
        assert n == (1 if expect_merged else 10), (merged, n)
        answers.append(_run(gate, [b]))
    expected = {
        "good": None, "forged": ("token_signature", at), "unknown_key": ("token_key", at),
        "type": ("token_malformed", at), "wrong_collection": ("token_collection", at),
        "wrong_challenge": ("token_challenge", at), "bad_value": ("invalid", at),
        "replayed": ("token_replayed", at), "two_tokens": ("token_count", at),
    }[scenario]
    if scenario == "bad_value":
        assert answers[0] == answers[1] and answers[0][0] is not None
        assert answers[0][0][1] == at
    else:
        assert answers == [[expected], [expected]]


def test_one_batch_of_tokens_of_two_windows_keeps_each_until_its_own_end(setup: Any) -> None:
    import redis

    redis_url, prefix, issuer = setup
    gate = _gate(redis_url, prefix, "auto")
    # four requests, tokens of A (1 h window) and B (10 min) interleaved: three expiry runs
    # in one request, several across requests
    plan = [[A, B, B, A], [A] * 9, [B] * 8 + [A], [A, B]]
    bodies, toks = [], []
    for specs in plan:
        items = [([issuer.token(s.id)], _message(s, 3, i)) for i, s in enumerate(specs)]
        toks.append([(s, ts[0]) for s, (ts, _) in zip(specs, items, strict=True)])
        bodies.append(token_frame(items))
    assert _run(gate, bodies) == [None] * len(plan)
    rds = redis.Redis.from_url(redis_url)
    names = scheme.PPKeys(prefix)
    for group in toks:
        for spec, t in group:
            w = scheme.window_of(time.time(), spec.window_seconds)
            key = names.spent(spec.id, w, b"").encode() + t[2:34]
            assert rds.pexpiretime(key) == (issuer.keys[spec.id][3] + SKEW) * 1000
    rds.close()
    # and each is spent: the same bodies again are all refused as replays
    again = _run(_gate(redis_url, prefix, "auto"), bodies)
    assert [a[0] if a else None for a in again] == ["token_replayed"] * len(plan)


def test_a_bad_verifier_setting_stops_the_gateway_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.config import GatewaySettings
    from ldpstream.privacypass import blindrsa
    from ldpstream.settings import ConfigError

    assert GatewaySettings.from_env({}).token_verifier == "auto"
    assert GatewaySettings.from_env({"LDP_GATEWAY_TOKEN_VERIFIER": "OpenSSL"}
                                    ).token_verifier == "openssl"
    with pytest.raises(ConfigError, match="LDP_GATEWAY_TOKEN_VERIFIER"):
        GatewaySettings.from_env({"LDP_GATEWAY_TOKEN_VERIFIER": "fast"})
    monkeypatch.setattr(blindrsa, "_gmpy2", None)  # a deployment without gmpy2
    with pytest.raises(ConfigError, match="LDP_GATEWAY_TOKEN_VERIFIER=gmpy2 needs"):
        GatewaySettings.from_env({"LDP_GATEWAY_TOKEN_VERIFIER": "gmpy2"})

    class NoRedis:  # the gate registers its script at construction, nothing more
        def register_script(self, script: str) -> None:
            return None

    assert TokenGate(NoRedis(), "p:", mode="optional", issuer_name="x", skew=1,
                     window_seconds=lambda c: None).verifier == "openssl"
    with pytest.raises(ValueError, match="verifier must be one of"):
        TokenGate(NoRedis(), "p:", mode="optional", issuer_name="x", skew=1,
                  window_seconds=lambda c: None, verifier="fast")
