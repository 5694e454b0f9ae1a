"""issuer.service: the token-request body parser (fuzzed), signing, and the keys, quotas and
specs the issuer keeps in a real Redis.  The issuer over HTTP: tests/issuer/test_app.py."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from functools import lru_cache
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import given, settings
from hypothesis import strategies as st

from issuer.service import (
    IssuanceError,
    IssuerKey,
    KeyManager,
    Quotas,
    SpecCache,
    decode_requests,
    sign_requests,
)
from ldpcore.collection import CollectionSpec
from ldpstream.privacypass import scheme
from ldpstream.privacypass.tokens import (
    TOKEN_REQUEST_LEN,
    begin_request,
    finalize_token,
    spki_der,
    verify_token,
)
from ldpstream.storage import CollectionCatalogue

SPEC = CollectionSpec.from_dict({"id": "iss", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                 "domain": {"kind": "categories", "labels": ["a", "b"]},
                                 "window_seconds": 600, "reports_per_window": 2,
                                 "memoization": "none"})


@lru_cache(maxsize=1)
def _key() -> IssuerKey:
    sk = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return IssuerKey(sk, scheme.KeyRecord.of("c", 0, 3600, spki_der(sk.public_key())))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=1200))
def test_fuzzed_token_request_bodies_are_refused_with_issuance_error_only(body: bytes) -> None:
    try:
        reqs = decode_requests(body, _key(), 3)
    except IssuanceError as exc:
        assert exc.status == 400 and exc.reason
        return
    assert len(body) == TOKEN_REQUEST_LEN * len(reqs)


def test_requests_for_the_key_are_signed_into_tokens_that_verify() -> None:
    key = _key()
    pk = key.sk.public_key()
    ch = scheme.challenge("ldpstream", "c", 0).encode()
    pending = [begin_request(pk, ch, spki=key.record.spki) for _ in range(2)]
    body = b"".join(r for r, _ in pending)
    reqs = decode_requests(body, key, 2)
    with pytest.raises(IssuanceError) as err:
        decode_requests(body, key, 1)
    assert err.value.reason == "too_many"
    answer = sign_requests(key, reqs)
    n = len(answer) // 2
    for i, (_, st_) in enumerate(pending):
        assert verify_token(pk, _decode(finalize_token(pk, st_, answer[i * n:(i + 1) * n])))


def _decode(raw: bytes) -> Any:
    from ldpstream.privacypass.tokens import Token

    return Token.decode(raw)


def test_keys_quotas_and_specs_in_redis(redis_server: Any) -> None:
    import redis
    import redis.asyncio as aredis

    prefix = f"is{uuid.uuid4().hex[:8]}:"
    sync = redis.Redis.from_url(redis_server.url)
    CollectionCatalogue(sync, prefix).register(SPEC)
    sync.close()
    window = int(time.time()) // 600 * 600

    async def run() -> None:
        client = aredis.Redis.from_url(redis_server.url)
        try:
            keys = KeyManager(client, prefix, skew=30)
            k1 = await keys.get(SPEC, window)
            assert keys.created == 1
            again = KeyManager(client, prefix, skew=30)  # another replica: the same key
            assert (await again.get(SPEC, window)).record == k1.record and again.created == 0
            assert await keys.published("iss", [window, window + 600]) == [k1.record]
            quotas = Quotas(client, prefix, skew=30)
            assert await quotas.reserve("dev", SPEC, window, 2) == 2
            with pytest.raises(IssuanceError) as err:
                await quotas.reserve("dev", SPEC, window, 1)
            assert (err.value.status, err.value.reason) == (429, "quota")
            assert "Retry-After" in err.value.headers
            await quotas.release("dev", SPEC, window, 1)
            assert await quotas.reserve("dev", SPEC, window, 1) == 2
            specs = SpecCache(client, prefix)
            assert await specs.get("iss") == SPEC and await specs.get("nope") is None
            assert await specs.ids() == ["iss"]
        finally:
            await client.aclose()

    asyncio.run(run())
    assert json.loads(SPEC.to_json())["id"] == "iss"
