"""The failover run once over TLS + SASL: Kafka SASL_SSL with SCRAM-SHA-256 on the three
local brokers, Redis (primary, replica, Sentinels) over TLS with an ACL user.

Every client goes through the secured listeners: the Python SDK ``Client`` and both
gateways send, the workers count with the Faust engine and then with the aiokafka one,
the janitor in the workers releases counted records, the query APIs answer.  Faults: the
busiest partitions' leader is killed, then the Redis primary, then the Faust workers
give way to aiokafka ones.  Redis ends equal to what was acknowledged, cell for cell.
"""

from __future__ import annotations

import time

import pytest

from ldpctl.cluster import LocalCluster

from .conftest import end_offsets, leader_of_busiest, log_offsets_of, run_scenario

# a cluster's start (1–2 min here) counts within the first test's time: room for a
# machine several times slower
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


def _wait_group_empty(cluster: LocalCluster, group: str, timeout: float = 180.0) -> None:
    assert cluster.kafka is not None
    deadline = time.monotonic() + timeout
    members: object = None
    while time.monotonic() < deadline:
        try:
            admin = cluster.kafka.admin()
            try:
                members = admin.describe_groups([group]).get(group, {}).get("members")
            finally:
                admin.close()
            if not members:
                return
        except Exception:  # noqa: BLE001 - no coordinator while the killed broker is away
            pass
        time.sleep(1.0)
    raise AssertionError(f"the Faust members of {group} still there after {timeout:.0f} s: "
                         f"{members}")


def test_failover_over_tls_and_sasl_with_both_engines(secure_cluster: LocalCluster) -> None:
    c = secure_cluster
    assert c.kafka is not None and c.redis is not None and c.secrets is not None
    env = c.service_env()
    assert env["LDP_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
    assert env["LDP_REDIS_URL"].startswith("rediss://")
    before = c.redis.primary_port()

    def fault() -> None:
        node = leader_of_busiest(c)
        c.kafka.broker(node).kill()  # type: ignore[union-attr]
        c.redis.primary().kill()  # type: ignore[union-attr]
        c.redis.wait_failover(before)  # type: ignore[union-attr]
        # the Faust workers leave the group; aiokafka ones take over the same state
        for w in c.services["worker"]:
            w.stop()
        # Once the Faust members are gone: their LeaveGroup may have gone to the killed
        # coordinator, and a member of another protocol in the group refuses the newcomers
        # (InconsistentGroupProtocol) until the old ones time out.
        _wait_group_empty(c, c.service_env()["LDP_CONSUMER_GROUP"])
        c.engine = "aiokafka"
        c.services["worker"] = [c._make("worker", i + 1).start() for i in range(2)]
        for w in c.services["worker"]:
            w.wait_ready()
        c.kafka.broker(node).start()  # type: ignore[union-attr]
        c.redis.node(before).start()  # type: ignore[union-attr]

    run_scenario(c, "secure", fault)
    assert all(w.env["LDP_ENGINE"] == "aiokafka" for w in c.services["worker"])
    # the janitor of the workers releases counted records over SASL_SSL as well
    ends = end_offsets(c)
    deadline = time.monotonic() + 60
    starts: dict[int, int] = {}
    while time.monotonic() < deadline:
        starts = log_offsets_of(c)[0]
        if sum(starts.values()) > 0:
            break
        time.sleep(1.0)
    assert sum(starts.values()) > 0, (starts, ends)
    assert all(starts[p] <= ends[p] for p in ends)
