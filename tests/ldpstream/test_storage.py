"""The sharded layout (Redis Cluster): every multi-key script call stays in one hash slot.

A cluster refuses a script or a transaction whose keys map to different slots
(CROSSSLOT); these check the key names each call builds, with the cluster's own slot
function.  tests/integration/test_redis_cluster.py runs them on a real cluster.
"""

from __future__ import annotations

import numpy as np
import pytest
from redis.crc import key_slot

from aggregator.config import WorkerSettings
from ldpstream.privacypass import scheme
from ldpstream.settings import ConfigError
from ldpstream.storage import Keys, flush_args
from query_api.config import ApiSettings


def slots(keys: list[str]) -> set[int]:
    return {key_slot(k.encode()) for k in keys}


def test_a_sharded_flush_keeps_every_key_of_a_partition_in_its_slot() -> None:
    keys = Keys("ldp:", sharded=True)
    deltas = {(cid, w): (3, np.ones(4, dtype=np.int64), 10**13)
              for cid in ("a", "b", "c") for w in (0, 3600)}
    k, _ = flush_args(keys, "ldp-reports", {5: (10, 20)}, deltas, lost={5: (1, 11, 11)},
                      requests={"d1.0": 10**13, "d2.3": 10**13}, shard=5)
    assert len(k) == 2 + 2 + 12
    assert slots(k) == {key_slot(b"ldp-reports:5")}
    assert k[0] == "ldp:{ldp-reports:5}wm"
    assert "ldp:{ldp-reports:5}state:a:3600" in k
    # another partition is another tag (and, over 16384 slots, mostly another slot)
    other, _ = flush_args(keys, "ldp-reports", {6: (1, 2)}, deltas, shard=6)
    assert slots(other) == {key_slot(b"ldp-reports:6")}


def test_the_single_layout_is_unchanged() -> None:
    keys = Keys("ldp:")
    k, a = flush_args(keys, "t", {0: (-1, 4), 1: (2, 9)},
                      {("c", 60): (2, np.array([0, 2]), 99)})
    assert k == ["ldp:wm:t", "ldp:lost", "ldp:state:c:60", "ldp:windows:c"]
    assert a[:3] == [0, "t", 2]
    assert (keys.collections, keys.catalogue_version, keys.private) == (
        "ldp:collections", "ldp:collections:version", "ldp:private")
    assert scheme.PPKeys("ldp:").spent("c", 60, b"\x01") == "ldp:pp:spent:c:60:01"


def test_a_sharded_flush_refuses_another_partitions_watermark() -> None:
    with pytest.raises(ValueError, match="shard 1"):
        flush_args(Keys(sharded=True), "t", {2: (0, 1)}, {}, shard=1)


def test_catalogue_and_token_keys_share_one_slot_each() -> None:
    keys = Keys("p:", sharded=True)
    assert len(slots([keys.collections, keys.catalogue_version, keys.private])) == 1
    pp = scheme.PPKeys("p:", sharded=True)
    spent = [pp.spent(c, w, bytes([i])) for i, (c, w) in enumerate(
        [("a", 0), ("b", 60), ("zz", 3600)])]
    assert len(slots(spent + [pp.public("a", 0), pp.public("b", 60)])) == 1


def test_a_prefix_with_braces_is_refused_on_a_cluster() -> None:
    with pytest.raises(ValueError, match="LDP_REDIS_PREFIX"):
        Keys("a{b}:", sharded=True)
    env = {"LDP_REDIS_PREFIX": "a{b}:", "LDP_REDIS_CLUSTER": "h:7000"}
    with pytest.raises(ConfigError, match="LDP_REDIS_PREFIX must have no braces"):
        WorkerSettings.from_env(env)
    with pytest.raises(ConfigError, match="LDP_REDIS_PREFIX"):
        ApiSettings.from_env(env)
    assert WorkerSettings.from_env({"LDP_REDIS_PREFIX": "a{b}:"}).redis_prefix == "a{b}:"
