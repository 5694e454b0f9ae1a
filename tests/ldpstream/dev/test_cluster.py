"""ldpstream.dev.cluster: the settings a secured local cluster hands its clients, and the
ports it picks.  The clusters themselves (3 Apache Kafka brokers, Sentinels, a Redis
Cluster) run in tests/cluster and tests/integration/test_redis_cluster.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from ldpstream.dev.cluster import (
    KafkaCluster,
    RedisSentinels,
    Secrets,
    _cluster_port,
    _pget,
    _redis_acl_args,
)

SECRETS = Secrets(Path("/s"), kafka_password="kp", redis_password="rp")


def test_secrets_give_every_client_its_credentials_and_ca() -> None:
    assert SECRETS.kafka_env()["LDP_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
    assert SECRETS.kafka_env()["LDP_KAFKA_SSL_CAFILE"] == "/s/ca.crt"
    assert SECRETS.redis_env() == {"LDP_REDIS_USERNAME": "ldp", "LDP_REDIS_PASSWORD": "rp",
                                   "LDP_REDIS_TLS_CA_FILE": "/s/ca.crt"}
    assert SECRETS.kafka_python()["sasl_plain_password"] == "kp"
    assert "rp" not in repr(SECRETS)  # passwords stay out of logs


def test_redis_acl_turns_the_default_user_off() -> None:
    args = _redis_acl_args(SECRETS)
    assert args[args.index("default") + 1] == "off" and ">rp" in args


def test_sentinel_settings_name_the_group_and_tls_when_secured(tmp_path: Path) -> None:
    plain = RedisSentinels(tmp_path)
    assert plain.env()["LDP_REDIS_URL"] == "redis://127.0.0.1/0"
    secured = RedisSentinels(tmp_path, secrets=SECRETS)
    env = secured.env()
    assert env["LDP_REDIS_URL"].startswith("rediss://") and env["LDP_REDIS_PASSWORD"] == "rp"
    assert env["LDP_REDIS_MASTER_NAME"] == secured.master


def test_a_kafka_cluster_gives_each_broker_its_own_ports_and_one_quorum(tmp_path: Path) -> None:
    c = KafkaCluster(tmp_path, 3)
    ports = {p for b in c.brokers for p in (b.port, b.controller_port)}
    assert len(ports) == 6 and len(c.bootstrap.split(",")) == 3
    assert c.broker(2) is c.brokers[1]
    assert c.live_bootstrap == c.bootstrap  # none running: all of them
    voters = {b.config["controller.quorum.voters"] for b in c.brokers}
    assert len(voters) == 1


def test_cluster_ports_leave_room_for_the_bus_port() -> None:
    port = _cluster_port(set())
    assert 20000 <= port < 30000
    assert _pget({"partition": 3}, "partition_index", "partition") == 3
    with pytest.raises(KeyError):
        _pget({}, "leader")
