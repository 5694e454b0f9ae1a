"""Cold answers stay fast and isolated: a pool per answer kind, ``auto`` kept across states."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

import ldpcore
from ldpcore.collection import CollectionSpec
from query_api import estimates as E
from query_api.choices import Choices
from query_api.config import ApiSettings
from query_api.metrics import ApiMetrics
from query_api.service import Service
from query_api.store import Store

from .states import register, write_window

pytestmark = [pytest.mark.integration, pytest.mark.any_broker]

ZIPF = np.arange(1, 65) ** -1.3 / (np.arange(1, 65) ** -1.3).sum()


def test_a_slow_answer_kind_never_blocks_the_others(redis_server: Any) -> None:
    import redis
    import redis.asyncio as aredis

    prefix = f"iso{uuid.uuid4().hex[:8]}:"
    spec = CollectionSpec.from_dict({"id": "os", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                     "domain": {"kind": "integers", "low": 0, "high": 63},
                                     "min_reports": 1})
    sync = redis.Redis.from_url(redis_server.url)
    register(sync, prefix, spec)
    o = spec.oracle()
    write_window(sync, prefix, spec, int(time.time()) // 3600 * 3600,
                 o.sample_state(ZIPF, 10_000, rng=1))  # type: ignore[attr-defined]
    sync.close()
    release = threading.Event()
    started: list[str] = []

    def slow(o: Any, s: Any, ne: float) -> dict[str, Any]:
        started.append(threading.current_thread().name)
        release.wait(60)  # holds its thread until the fast answers are in
        return {"slow": True}

    def fast(o: Any, s: Any, ne: float) -> dict[str, Any]:
        return {"fast": threading.current_thread().name}

    async def run() -> None:
        client = aredis.Redis.from_url(redis_server.url)
        settings = ApiSettings(redis_url=redis_server.url, redis_prefix=prefix,
                               estimate_threads=2)
        svc = Service(settings, Store(client, prefix), ApiMetrics(CollectorRegistry()))
        try:
            # More slow subset answers than the subset pool has threads.
            slow_ones = [asyncio.ensure_future(svc.answer(spec, "subset", (k,), None, None, slow))
                         for k in range(4)]
            while len(started) < 2:
                await asyncio.sleep(0.01)
            for query in ("frequencies", "heavy-hitters", "series:frequencies", "top-items"):
                body, cache, _ = await asyncio.wait_for(
                    svc.answer(spec, query, (), None, None, fast), 30)
                assert cache == "miss" and b"ldp-estimate-" + query.split(":")[0].encode() \
                    in body
            assert not any(f.done() for f in slow_ones)  # still waiting: they did not block
            release.set()
            assert all(b'"slow":true' in b for b, _, _ in await asyncio.gather(*slow_ones))
            assert all(name.startswith("ldp-estimate-subset") for name in started)
        finally:
            release.set()
            svc.close()
            await client.aclose()

    asyncio.run(run())


def test_the_auto_choice_is_kept_across_nearby_states_and_made_again_when_n_grows() -> None:
    o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=64)
    store = Choices(factor=1.25, max_age_s=300)
    slot = store.slot(("fp", (None, None), "full"))
    s0 = o.sample_state(ZIPF, 40_000, rng=1)  # type: ignore[attr-defined]
    first = E.frequencies(o, s0, labels=None, method="auto", confidence=0.95, choice=slot)
    assert first["method_choice"]["chosen_at_n"] == 40_000
    assert first["method"] == first["method_choice"]["method"]
    # A few flushes later (10 % more reports): the same choice, stated; a fresh interval.
    s1 = s0 + o.sample_state(ZIPF, 4_000, rng=2)  # type: ignore[attr-defined]
    kept = E.frequencies(o, s1, labels=None, method="auto", confidence=0.95, choice=slot)
    assert kept["method_choice"]["chosen_at_n"] == 40_000 and kept["method"] == first["method"]
    assert "1.25" in kept["method_choice"]["refresh"]
    assert kept["estimates"] != first["estimates"]
    # n grew beyond the factor: chosen again, at once, for the new n.
    s2 = s1 + o.sample_state(ZIPF, 20_000, rng=3)  # type: ignore[attr-defined]
    again = E.frequencies(o, s2, labels=None, method="auto", confidence=0.95, choice=slot)
    assert again["method_choice"]["chosen_at_n"] == 64_000
    # The kept choice gives the answer auto would give for that method.
    direct = E.frequencies(o, s1, labels=None, method=kept["method"], confidence=0.95)
    assert [r["ci_low"] for r in direct["estimates"]] == \
        [r["ci_low"] for r in kept["estimates"]]


def test_an_old_choice_is_used_while_it_is_made_again_in_the_background() -> None:
    o = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=64)
    with ThreadPoolExecutor(1) as pool:
        store = Choices(factor=1.25, max_age_s=0.2, executor=pool)
        slot = store.slot("k")
        s0 = o.sample_state(ZIPF, 20_000, rng=1)  # type: ignore[attr-defined]
        E.frequencies(o, s0, labels=None, method="auto", confidence=0.95, choice=slot)
        time.sleep(0.3)
        s1 = s0 + o.sample_state(ZIPF, 1_000, rng=2)  # type: ignore[attr-defined]
        old = E.frequencies(o, s1, labels=None, method="auto", confidence=0.95, choice=slot)
        assert old["method_choice"]["chosen_at_n"] == 20_000  # served at once
        deadline = time.time() + 60
        while store.lookup("k", 21_000)[0].n != 21_000:  # type: ignore[union-attr]
            assert time.time() < deadline, "the background choice never landed"
            time.sleep(0.05)
