"""The query API's caches are bounded in bytes (answers, states), and say so in /metrics."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from ldpcore.collection import CollectionSpec
from query_api.app import create_app
from query_api.cache import ByteLRU
from query_api.config import ApiSettings, ConfigError

from .states import register, write_window

MIB = 1 << 20


def test_a_byte_lru_keeps_the_newest_entries_within_its_bytes() -> None:
    seen: list[tuple[int, int, int]] = []
    c = ByteLRU(1000, getsizeof=len, on_change=lambda *a: seen.append(a))
    for i in range(10):
        c.put(i, b"x" * 300)
    assert c.currsize <= 1000 and len(c) == 3 and c.evictions == 7
    assert [c.get(i) is not None for i in (0, 7, 8, 9)] == [False, True, True, True]
    c.get(7)  # used: the next eviction takes 8, the least recently used
    c.put("big", b"y" * 300)
    assert c.get(8) is None and c.get(7) is not None
    c.put("huge", b"z" * 5000)  # larger than the whole budget: not kept, nothing lost
    assert c.get("huge") is None and len(c) == 3
    assert seen[-1] == (3, 900, 0)


def test_cache_settings_are_bytes_and_the_old_count_fails_naming_the_new_ones() -> None:
    s = ApiSettings.from_env({"LDP_ANSWER_CACHE_MB": "3", "LDP_STATE_CACHE_MB": "5"})
    assert (s.answer_cache_bytes, s.state_cache_bytes) == (3 * MIB, 5 * MIB)
    with pytest.raises(ConfigError, match="LDP_ANSWER_CACHE_MB"):
        ApiSettings.from_env({"LDP_CACHE_ENTRIES": "1024"})
    with pytest.raises(ConfigError, match="LDP_STATE_CACHE_MB"):
        ApiSettings.from_env({"LDP_STATE_CACHE_MB": "lots"})


@pytest.fixture(scope="module")
def small_cache(redis_server: Any) -> Iterator[TestClient]:
    import redis

    prefix = f"cb{uuid.uuid4().hex[:8]}:"
    client = redis.Redis.from_url(redis_server.url)
    spec = CollectionSpec.from_dict({
        "id": "lat", "oracle": {"mechanism": "hh", "epsilon": 2.0, "fanout": 4},
        "domain": {"kind": "integers", "low": 0, "high": 4095}, "min_reports": 1})
    register(client, prefix, spec)
    o = spec.oracle()
    p = np.exp(-np.arange(4096) / 300.0)
    start = int(time.time()) // 3600 * 3600
    write_window(client, prefix, spec, start,
                 o.sample_state(p / p.sum(), 50_000, rng=1))  # type: ignore[attr-defined]
    client.close()
    settings = ApiSettings(redis_url=redis_server.url, redis_prefix=prefix,
                           answer_cache_bytes=1 * MIB, state_cache_bytes=1 * MIB)
    with TestClient(create_app(settings, registry=CollectorRegistry())) as api:
        yield api


def _metric(text: str, name: str, cache: str) -> float:
    line = next(x for x in text.splitlines() if x.startswith(f'{name}{{cache="{cache}"}}'))
    return float(line.split()[-1])


def test_answers_beyond_the_budget_are_evicted_and_the_bytes_are_in_metrics(
        small_cache: TestClient) -> None:
    sizes = []
    for k in range(12):  # a 4096-point CDF with its bands: ≈ 250 kB per answer
        r = small_cache.get(f"/v1/collections/lat/cdf?confidence=0.9{k}")
        assert r.status_code == 200, r.text
        sizes.append(len(r.content))
    assert sum(sizes) > 2 * MIB  # more than the budget was served
    text = small_cache.get("/metrics").text
    used = _metric(text, "ldp_api_cache_bytes", "answers")
    assert 0.5 * MIB < used <= MIB
    assert _metric(text, "ldp_api_cache_limit_bytes", "answers") == MIB
    assert _metric(text, "ldp_api_cache_evictions_total", "answers") >= 6
    assert 0 < _metric(text, "ldp_api_cache_bytes", "states") <= MIB
