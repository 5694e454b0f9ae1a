"""query_api.store: collections and state versions read from a real Redis (async)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from ldpcore.collection import CollectionSpec
from ldpstream.storage import CollectionConflict
from query_api.store import StateVersion, Store

from .states import simulated_state, write_window

RAW = {"id": "s", "oracle": {"mechanism": "grr", "epsilon": 1.0},
       "domain": {"kind": "categories", "labels": ["a", "b", "c"]}}
SPEC = CollectionSpec.from_dict(RAW)


def test_a_version_tag_changes_with_the_state() -> None:
    a = StateVersion(((0, 10),), 5)
    assert a.n == 10 and a.tag == StateVersion(((0, 10),), 5).tag
    assert a.tag != StateVersion(((0, 11),), 5).tag
    assert a.tag != StateVersion(((0, 10),), 5, lost_records=1).tag


def test_register_read_version_state_and_delete(redis_server: Any) -> None:
    import redis
    import redis.asyncio as aredis

    prefix = f"st{uuid.uuid4().hex[:8]}:"
    start = int(time.time()) // 3600 * 3600
    state = simulated_state(SPEC, "uniform", 300, seed=1)

    async def run() -> None:
        client = aredis.Redis.from_url(redis_server.url)
        store = Store(client, prefix)
        try:
            assert await store.ping()
            assert await store.register(SPEC)
            assert not await store.register(SPEC)  # the same spec again: nothing new
            other = CollectionSpec.from_dict({**RAW, "oracle": {"mechanism": "grr",
                                                                "epsilon": 2.0}})
            with pytest.raises(CollectionConflict):
                await store.register(other)
            assert await store.get("s") == SPEC and [s.id for s in await store.all()] == ["s"]
            sync = redis.Redis.from_url(redis_server.url)
            write_window(sync, prefix, SPEC, start, state)
            sync.close()
            v = await store.version(SPEC, None, None)
            assert v.n == 300 and v.windows == ((start, 300),)
            assert await store.state(SPEC, v) == state
            assert (await store.window_states(SPEC, [start]))[0] == state
            assert await store.health() == {}
            assert await store.delete("s") and await store.get("s") is None
        finally:
            await client.aclose()

    asyncio.run(run())


def test_specs_come_from_a_snapshot_fresh_within_spec_ttl(redis_server: Any) -> None:
    import redis.asyncio as aredis

    prefix = f"sc{uuid.uuid4().hex[:8]}:"

    async def run() -> None:
        client = aredis.Redis.from_url(redis_server.url)
        kept = Store(client, prefix, spec_ttl=60.0)  # the snapshot is trusted for a minute
        brief = Store(client, prefix, spec_ttl=0.05)
        other = Store(client, prefix)  # another writer (an API process, the CLI)
        try:
            assert await kept.register(SPEC) and await kept.get("s") == SPEC  # own write
            assert await brief.get("s") == SPEC
            assert await other.delete("s")
            # Within its spec_ttl a store answers from its snapshot: no Redis read ...
            assert await kept.get("s") == SPEC
            # ... and past it the deletion is seen.
            await asyncio.sleep(0.06)
            assert await brief.get("s") is None
            # A write through the store itself is seen by its very next read.
            assert not await kept.delete("s")
            assert await kept.get("s") is None
            assert await kept.register(SPEC) and await kept.get("s") == SPEC
        finally:
            await client.aclose()

    asyncio.run(run())


def test_a_version_is_read_after_redis_forgot_the_script(redis_server: Any) -> None:
    import redis
    import redis.asyncio as aredis

    prefix = f"sv{uuid.uuid4().hex[:8]}:"
    start = int(time.time()) // 3600 * 3600
    sync = redis.Redis.from_url(redis_server.url)
    write_window(sync, prefix, SPEC, start, simulated_state(SPEC, "uniform", 200, seed=2))
    sync.close()

    async def run() -> None:
        client = aredis.Redis.from_url(redis_server.url)
        store = Store(client, prefix)
        try:
            assert (await store.version(SPEC, None, None)).n == 200
            await client.script_flush()  # a restarted Redis has no scripts
            assert (await store.version(SPEC, None, None)).windows == ((start, 200),)
        finally:
            await client.aclose()

    asyncio.run(run())
