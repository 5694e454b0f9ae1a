"""query_api.fleet: the fleet budget the API states in every answer, read through Redis.

The routes (GET/PUT /v1/fleet, refusals) are in tests/query_api/routes/test_fleet.py."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from ldpcore.budget import FleetBudget
from ldpcore.collection import CollectionSpec
from query_api.fleet import FleetView
from query_api.store import Store

SPEC = CollectionSpec.from_dict({"id": "f", "oracle": {"mechanism": "grr", "epsilon": 0.5},
                                 "domain": {"kind": "categories", "labels": ["a", "b"]},
                                 "memoization": "none"})


def test_the_budget_is_added_to_answers_and_follows_a_new_policy(redis_server: Any) -> None:
    import redis.asyncio as aredis

    async def run() -> None:
        client = aredis.Redis.from_url(redis_server.url)
        try:
            store = Store(client, f"fl{uuid.uuid4().hex[:8]}:")
            await store.register(SPEC)
            view = FleetView(store)
            assert (await view.budget()).epsilon_per_day is None
            body = json.loads(await view.stated(SPEC, b'{"n":1}'))
            assert body["n"] == 1 and body["budget"]["epsilon_per_day"] is None
            await view.set_budget(FleetBudget(epsilon_per_day=8.0))
            fields = await view.fields(SPEC)
            assert fields["epsilon_per_day"] == 8.0
            assert fields["device_epsilon_per_day"] > 0
            assert json.loads(await view.stated(SPEC, b'{"n":1}'))["budget"] == fields
            assert await view.stated(SPEC, b"[1]") == b"[1]"  # not an object: unchanged
        finally:
            await client.aclose()

    asyncio.run(run())
