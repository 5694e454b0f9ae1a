"""Service.answer: one computation per (version, query), stale-while-revalidate, off the loop."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from query_api.config import ApiSettings
from query_api.metrics import ApiMetrics
from query_api.service import Service
from query_api.store import StateVersion, Store

pytestmark = [pytest.mark.integration, pytest.mark.any_broker]


def _service(pipeline: dict[str, Any], **settings: Any) -> tuple[Service, Any]:
    import redis.asyncio as aredis

    client = aredis.Redis.from_url(pipeline["redis_url"])
    s = ApiSettings(redis_url=pipeline["redis_url"], redis_prefix=pipeline["names"]["prefix"],
                    **settings)
    return Service(s, Store(client, s.redis_prefix), ApiMetrics(CollectorRegistry())), client


def test_concurrent_misses_share_one_computation_off_the_event_loop(
        pipeline: dict[str, Any]) -> None:
    spec = pipeline["specs"]["os"]
    calls: list[str] = []

    def compute(o: Any, s: Any, ne: float) -> dict[str, Any]:
        calls.append(threading.current_thread().name)
        return {"answer": s.n}

    async def run() -> list[Any]:
        svc, client = _service(pipeline)
        try:
            return await asyncio.gather(*(svc.answer(spec, "q", (), None, None, compute)
                                          for _ in range(8)))
        finally:
            svc.close()
            await client.aclose()

    out = asyncio.run(run())
    assert len(calls) == 1 and calls[0].startswith("ldp-estimate")
    assert {body for body, _, _ in out} == {out[0][0]}
    assert json.loads(out[0][0])["answer"] == pipeline["truth"]["os"].reports


def test_a_new_version_is_served_stale_then_fresh(pipeline: dict[str, Any]) -> None:
    spec = pipeline["specs"]["os"]
    seen: list[str] = []

    def compute(o: Any, s: Any, ne: float) -> dict[str, Any]:
        return {"computed": len(seen)}

    async def run() -> None:
        svc, client = _service(pipeline, max_stale_s=60.0)
        try:
            v1 = await svc.version(spec, None, None)
            body1, cache1, tag1 = await svc.answer(spec, "q", (), None, None, compute,
                                                   version=v1)
            seen.append(cache1)
            # The next flush: same windows, more reports (another version tag).
            v2 = StateVersion(tuple((s, n + 1) for s, n in v1.windows), v1.last_flush_ms + 1)
            body2, cache2, tag2 = await svc.answer(spec, "q", (), None, None, compute,
                                                   version=v2)
            assert (cache2, tag2, body2) == ("stale", tag1, body1)
            await asyncio.gather(*svc._inflight.values())
            body3, cache3, tag3 = await svc.answer(spec, "q", (), None, None, compute,
                                                   version=v2)
            assert (cache3, tag3) == ("hit", v2.tag) and body3 != body1
            assert json.loads(body3)["state_version"] == v2.tag
        finally:
            svc.close()
            await client.aclose()

    asyncio.run(run())
    assert seen == ["miss"]


def test_without_staleness_a_new_version_waits_for_its_own_answer(
        pipeline: dict[str, Any]) -> None:
    spec = pipeline["specs"]["os"]

    async def run() -> None:
        svc, client = _service(pipeline, max_stale_s=0.0)
        try:
            v1 = await svc.version(spec, None, None)
            await svc.answer(spec, "q", (), None, None, lambda o, s, ne: {}, version=v1)
            v2 = StateVersion(tuple((s, n + 1) for s, n in v1.windows), v1.last_flush_ms + 1)
            _, cache, tag = await svc.answer(spec, "q", (), None, None, lambda o, s, ne: {},
                                             version=v2)
            assert (cache, tag) == ("miss", v2.tag)
        finally:
            svc.close()
            await client.aclose()

    asyncio.run(run())
