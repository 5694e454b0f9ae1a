"""Misses under a live stream (query_api.service): one state read and one ``prepare`` per
state version however many requests miss on it at once, and a new version answered from the
previous one for at most LDP_MAX_STALE_MS — with that state's own n, version and as_of."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

import ldpcore
from ldpcore import intervals
from ldpcore.collection import CollectionSpec
from query_api import estimates as E
from query_api.config import ApiSettings
from query_api.metrics import ApiMetrics
from query_api.service import Service, encode
from query_api.store import Store

from .states import register, write_window

SPEC = CollectionSpec.from_dict({"id": "misses", "oracle": {"mechanism": "olh",
                                                             "epsilon": 1.0},
                                 "domain": {"kind": "integers", "low": 0, "high": 63},
                                 "min_reports": 1})


@pytest.fixture
def flushed(redis_client: Any, ldp_names: dict[str, str]) -> Iterator[dict[str, Any]]:
    """A collection in a real Redis with one flushed window, and a way to flush more."""
    prefix = ldp_names["prefix"]
    register(redis_client, prefix, SPEC)
    start = int(time.time()) // SPEC.window_seconds * SPEC.window_seconds
    w = 1.0 / np.arange(1, 65) ** 1.2
    rng = np.random.default_rng(5)

    def flush(n: int) -> ldpcore.State:
        state = SPEC.oracle().sample_state(w / w.sum(), n, rng=rng)
        write_window(redis_client, prefix, SPEC, start, state)
        time.sleep(0.002)  # a later flush time (ms): another version
        return state

    flush(20_000)
    yield {"prefix": prefix, "flush": flush}


def _run(redis_url: str, prefix: str, body: Any, **settings: Any) -> Any:
    import redis.asyncio as aredis

    async def go() -> Any:
        client = aredis.Redis.from_url(redis_url)
        s = ApiSettings(redis_url=redis_url, redis_prefix=prefix, version_ttl_s=0.0,
                        **settings)
        svc = Service(s, Store(client, prefix), ApiMetrics(CollectorRegistry()))
        try:
            return await body(svc)
        finally:
            svc.close()
            await client.aclose()

    return asyncio.run(go())


def _frequencies(svc: Service, level: float) -> Any:
    slot = svc.choices.slot(("freq",))
    return svc.answer(SPEC, "frequencies", ("auto", level), None, None,
                      lambda o, s, ne: E.frequencies(o, s, labels=None, method="auto",
                                                     confidence=level, n_effective=ne,
                                                     choice=slot))


def test_concurrent_misses_on_a_new_version_read_it_once_and_prepare_it_once(
        redis_server: Any, flushed: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    prepared: list[int] = []
    reads: list[int] = []
    real_prepare, real_windows = intervals.prepare, Store.window_states

    def counting_prepare(*a: Any, **k: Any) -> Any:
        prepared.append(1)
        return real_prepare(*a, **k)

    async def counting_windows(self: Store, *a: Any) -> Any:
        reads.append(1)
        return await real_windows(self, *a)

    monkeypatch.setattr(intervals, "prepare", counting_prepare)
    monkeypatch.setattr(Store, "window_states", counting_windows)

    async def body(svc: Service) -> Any:
        return await asyncio.gather(*(_frequencies(svc, 0.9 + i / 1000) for i in range(10)))

    out = _run(redis_server.url, flushed["prefix"], body, max_stale_s=0.0)
    assert [cache for _, cache, _ in out] == ["miss"] * 10
    assert len({tag for _, _, tag in out}) == 1
    assert len({body for body, _, _ in out}) == 10  # ten levels, ten intervals
    assert len(reads) == 1  # one Redis read of the new version's window
    assert len(prepared) == 1  # auto's choice prepared once; the nine others share it


@pytest.mark.parametrize("max_stale_s", [60.0, 0.0])
def test_a_new_version_is_answered_from_the_previous_state_only_within_max_stale(
        redis_server: Any, flushed: dict[str, Any], max_stale_s: float) -> None:
    async def body(svc: Service) -> Any:
        first, _, tag1 = await _frequencies(svc, 0.9)
        flushed["flush"](5_000)
        # A level never asked, on a version never computed.
        after, cache, tag = await _frequencies(svc, 0.91)
        await asyncio.gather(*svc._inflight.values())  # the new version, computed meanwhile
        fresh, cache2, tag2 = await _frequencies(svc, 0.92)
        return first, tag1, after, cache, tag, fresh, cache2, tag2

    first, tag1, after, cache, tag, fresh, cache2, tag2 = _run(
        redis_server.url, flushed["prefix"], body, max_stale_s=max_stale_s)
    a, b, c = json.loads(first), json.loads(after), json.loads(fresh)
    assert a["n"] == 20_000 and a["state_version"] == tag1
    assert c["n"] == 25_000 and c["state_version"] == tag2 != tag1
    assert c["as_of"] > a["as_of"] and cache2 in ("miss", "hit")
    assert b["confidence"] == 0.91 and b["estimates"] != a["estimates"]
    if max_stale_s == 0.0:  # every answer waits for its own version
        assert (cache, tag) == ("miss", tag2) and b["n"] == 25_000
        return
    # The previous state answered, and says so: its n, n_effective, version and as_of.
    assert (cache, tag) == ("stale", tag1)
    for field in ("n", "n_effective", "state_version", "as_of"):
        assert b[field] == a[field]


def test_the_fast_encoder_writes_the_values_json_writes() -> None:
    body = {"a": [0.1, 1e-7, 1e16, 5e-324, 2.5, None, True, "é"], "n": 2**63 - 1,
            "big": {"k": 2**70}}
    assert json.loads(encode(body)) == body
    assert json.loads(encode({"x": 0.30000000000000004})) == {"x": 0.30000000000000004}
