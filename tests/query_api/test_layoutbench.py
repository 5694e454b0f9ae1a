"""query_api.layoutbench (``ldpstream bench redis-layout``): one round on a real Redis.

The benchmark compares one Redis with a 3-primary cluster; the cluster side is exercised by
tests/integration/test_redis_cluster.py."""

from __future__ import annotations

from typing import Any

from query_api import layoutbench


def test_the_median_is_in_milliseconds() -> None:
    assert layoutbench._median_ms(lambda: None, 3) < 5.0


def test_a_short_run_on_one_redis_flushes_reads_and_counts(redis_server: Any) -> None:
    import redis
    import redis.asyncio as aredis

    client = redis.Redis.from_url(redis_server.url)
    try:
        out = layoutbench._bench(client, lambda: aredis.Redis.from_url(redis_server.url),
                                 partitions=2, rounds=3)
        assert set(out) == {"flush", "load_state", "api_read", "n"}
        assert out["n"] > 0 and all(out[k] >= 0 for k in ("flush", "load_state",
                                                                "api_read"))
    finally:
        client.close()
