"""The shared catalogue client against a real Redis: freshness through the version key,
misses merged into one check and negatively cached, failures told apart from unknown ids."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from ldpcore.collection import CollectionSpec
from ldpstream.catalogue import (
    MISS_TTL,
    Catalogue,
    CatalogueUnavailable,
    SyncCatalogue,
)
from ldpstream.storage import CollectionCatalogue, Keys

pytestmark = pytest.mark.integration


def spec(cid: str, eps: float = 1.0) -> CollectionSpec:
    return CollectionSpec.from_dict({"id": cid, "oracle": {"mechanism": "grr", "epsilon": eps},
                                     "domain": {"kind": "integers", "low": 0, "high": 7}})


@pytest.fixture
def prefix() -> str:
    return f"c{uuid.uuid4().hex[:8]}:"


class CountingRedis:
    """A real ``redis.asyncio`` client that counts the commands sent (not a fake: every
    call goes to the server)."""

    def __init__(self, client: Any) -> None:
        self.client, self.gets = client, 0

    async def get(self, key: str) -> Any:
        self.gets += 1
        await asyncio.sleep(0.01)  # a slow Redis: misses pile up behind one check
        return await self.client.get(key)

    def pipeline(self, transaction: bool = True) -> Any:
        return self.client.pipeline(transaction=transaction)


def test_register_bumps_the_version_once_per_new_collection(redis_client: Any,
                                                            prefix: str) -> None:
    cat = CollectionCatalogue(redis_client, prefix)
    key = Keys(prefix).catalogue_version
    assert cat.register(spec("a")) is True
    assert redis_client.get(key) == b"1"
    assert cat.register(spec("a")) is False        # equal spec: nothing changes
    assert cat.register(spec("b")) is True
    assert redis_client.get(key) == b"2"


def test_a_new_collection_is_seen_within_freshness_and_at_once_by_a_miss(
        redis_server: Any, redis_client: Any, prefix: str) -> None:
    import redis.asyncio as aioredis

    async def main() -> None:
        client = aioredis.Redis.from_url(redis_server.url)
        changes: list[set[str]] = []
        reader = Catalogue(client, prefix, freshness=0.2,
                           on_change=lambda specs: changes.append(set(specs)))
        await reader.load()
        assert reader.get("new") is None
        runner = asyncio.create_task(reader.run())
        try:
            CollectionCatalogue(redis_client, prefix).register(spec("new"))
            t0 = time.monotonic()
            while reader.get("new") is None:
                assert time.monotonic() - t0 < 5, "not seen by the poll"
                await asyncio.sleep(0.02)
            assert changes[-1] == {"new"}
            # a miss finds a collection registered a moment ago without waiting for the poll
            CollectionCatalogue(redis_client, prefix).register(spec("newer"))
            await asyncio.sleep(MISS_TTL)
            found = await reader.find("newer")
            assert found is not None and found.id == "newer"
        finally:
            runner.cancel()
            await client.aclose()
    asyncio.run(main())


def test_unknown_ids_at_any_rate_cost_one_merged_check_per_miss_ttl(
        redis_server: Any, prefix: str) -> None:
    import redis.asyncio as aioredis

    async def main() -> None:
        client = aioredis.Redis.from_url(redis_server.url, max_connections=2)
        counting = CountingRedis(client)
        reader = Catalogue(counting, prefix)
        await reader.load()
        await asyncio.sleep(MISS_TTL)
        t0 = time.monotonic()
        answers = await asyncio.gather(*(reader.find(f"unknown-{i}") for i in range(5000)))
        elapsed = time.monotonic() - t0
        assert answers == [None] * 5000
        # one check for all of them (merged), however many distinct ids; no per-id state
        assert counting.gets <= 1 + elapsed / MISS_TTL, (counting.gets, elapsed)
        await client.aclose()
    asyncio.run(main())


def test_a_failed_check_is_unavailable_not_unknown_and_known_ids_keep_working(
        prefix: str, tmp_path: Any) -> None:
    import redis
    import redis.asyncio as aioredis

    from ldpstream.dev.servers import start_redis

    own = start_redis(tmp_path)
    try:
        CollectionCatalogue(redis.Redis.from_url(own.url), prefix).register(spec("known"))

        async def main() -> None:
            client = aioredis.Redis.from_url(own.url, socket_timeout=2)
            reader = Catalogue(client, prefix)
            await reader.load()
            own.stop()
            await asyncio.sleep(MISS_TTL)
            with pytest.raises(CatalogueUnavailable):
                await reader.find("unknown")
            assert reader.errors == 1
            # within MISS_TTL of a failure, misses fail at once without a new round trip
            with pytest.raises(CatalogueUnavailable):
                await reader.find("unknown-2")
            assert reader.errors == 1
            assert (await reader.find("known")) is not None   # the snapshot stays in use
            await client.aclose()
        asyncio.run(main())
    finally:
        own.stop()


def test_the_sync_face_follows_the_same_rule(redis_client: Any, prefix: str) -> None:
    now = [0.0]
    reader = SyncCatalogue(redis_client, prefix, freshness=1.0, clock=lambda: now[0])
    assert reader.get("x") is None
    checks = reader.checks
    assert reader.get("y") is None and reader.checks == checks    # negatively cached
    CollectionCatalogue(redis_client, prefix).register(spec("x"))
    assert reader.get("x") is None                                # cached "unknown"
    now[0] += MISS_TTL
    got = reader.get("x")                                         # the miss checks again
    assert got is not None and got.id == "x"
    redis_client.hdel(Keys(prefix).collections, "x")              # a writer that skips the
    now[0] += 5.0                                                 # version: only a full
    assert reader.get("x") is not None                            # re-read would see it
    assert set(reader.all()) == {"x"}
