"""Configuration: every bad ``LDP_…`` value fails at start-up naming the variable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from aggregator.config import WorkerSettings
from ldpstream.connections import KafkaSecurity, RedisOptions
from ldpstream.settings import ConfigError
from query_api.config import ApiSettings

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("env", "named"), [
    ({"LDP_KAFKA_BOOTSTRAP": "nohostport"}, "LDP_KAFKA_BOOTSTRAP"),
    ({"LDP_REDIS_URL": "http://x"}, "LDP_REDIS_URL"),
    ({"LDP_TOPIC_PARTITIONS": "0"}, "LDP_TOPIC_PARTITIONS"),
    ({"LDP_TOPIC_REPLICATION": "three"}, "LDP_TOPIC_REPLICATION"),
    ({"LDP_METRICS_PORT": "70000"}, "LDP_METRICS_PORT"),
    ({"LDP_REPORTS_TOPIC": "bad topic"}, "LDP_REPORTS_TOPIC"),
    ({"LDP_COLLECTIONS_FILE": "/nonexistent.yaml"}, "LDP_COLLECTIONS_FILE"),
    ({"LDP_HEARTBEAT_MS": "5000", "LDP_SESSION_TIMEOUT_MS": "6000"}, "LDP_HEARTBEAT_MS"),
    ({"LDP_KAFKA_SECURITY_PROTOCOL": "TLS"}, "LDP_KAFKA_SECURITY_PROTOCOL"),
    ({"LDP_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"}, "LDP_KAFKA_SASL_USERNAME"),
    ({"LDP_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "LDP_KAFKA_SASL_USERNAME": "u"},
     "LDP_KAFKA_SASL_PASSWORD"),
    ({"LDP_KAFKA_SASL_MECHANISM": "GSSAPI"}, "LDP_KAFKA_SASL_MECHANISM"),
    ({"LDP_KAFKA_SSL_CAFILE": "/nonexistent.pem"}, "LDP_KAFKA_SSL_CAFILE"),
    ({"LDP_KAFKA_SSL_CHECK_HOSTNAME": "maybe"}, "LDP_KAFKA_SSL_CHECK_HOSTNAME"),
    ({"LDP_REDIS_TLS_CA_FILE": __file__}, "LDP_REDIS_TLS_"),  # TLS file, redis:// URL
    ({"LDP_ENGINE": "kafka-streams"}, "LDP_ENGINE"),
    ({"LDP_REBALANCE_TIMEOUT_MS": "10"}, "LDP_REBALANCE_TIMEOUT_MS"),
    ({"LDP_MAX_POLL_INTERVAL_MS": "999"}, "LDP_MAX_POLL_INTERVAL_MS"),
])
def test_worker_settings_reject_bad_values_naming_the_variable(
        env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        WorkerSettings.from_env(env)


@pytest.mark.parametrize(("env", "named"), [
    ({"LDP_API_PORT": "0"}, "LDP_API_PORT"),
    ({"LDP_ADMIN_TOKEN": "short"}, "LDP_ADMIN_TOKEN"),
    ({"LDP_STREAM_INTERVAL_S": "fast"}, "LDP_STREAM_INTERVAL_S"),
    ({"LDP_REDIS_PREFIX": "a b"}, "LDP_REDIS_PREFIX"),
    ({"LDP_REDIS_TLS_CERT_FILE": __file__, "LDP_REDIS_URL": "rediss://h:6380"},
     "LDP_REDIS_TLS_KEY_FILE"),
])
def test_api_settings_reject_bad_values_naming_the_variable(
        env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        ApiSettings.from_env(env)


def test_defaults_are_loopback_and_plaintext() -> None:
    s = WorkerSettings.from_env({})
    assert s.metrics_host == "127.0.0.1" and s.kafka_security.protocol == "PLAINTEXT"
    assert s.kafka_security.aiokafka() == {"security_protocol": "PLAINTEXT"}
    assert s.redis_options.kwargs() == {}
    assert ApiSettings.from_env({}).host == "127.0.0.1"


def test_sasl_ssl_maps_to_both_kafka_clients_and_hides_the_password() -> None:
    env = {"LDP_KAFKA_SECURITY_PROTOCOL": "sasl_ssl", "LDP_KAFKA_SASL_MECHANISM": "scram-sha-512",
           "LDP_KAFKA_SASL_USERNAME": "ldp", "LDP_KAFKA_SASL_PASSWORD": "s3cret-pw",
           "LDP_KAFKA_SSL_CHECK_HOSTNAME": "false"}
    sec = KafkaSecurity.from_env(env)
    aio = sec.aiokafka()
    assert aio["security_protocol"] == "SASL_SSL" and aio["sasl_mechanism"] == "SCRAM-SHA-512"
    assert aio["sasl_plain_username"] == "ldp" and aio["sasl_plain_password"] == "s3cret-pw"
    assert aio["ssl_context"].check_hostname is False
    kp = sec.kafka_python()
    assert kp["sasl_plain_password"] == "s3cret-pw" and kp["ssl_check_hostname"] is False
    assert "s3cret-pw" not in repr(sec)
    assert "s3cret-pw" not in repr(WorkerSettings.from_env(env))


def test_aiokafka_and_kafka_python_accept_the_security_arguments() -> None:
    # The clients validate their keyword arguments at construction (no connection yet).
    import asyncio

    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    sec = KafkaSecurity.from_env({"LDP_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                                  "LDP_KAFKA_SASL_USERNAME": "u",
                                  "LDP_KAFKA_SASL_PASSWORD": "p"})

    async def build() -> None:  # unknown keywords would raise TypeError here
        await AIOKafkaProducer(bootstrap_servers="127.0.0.1:1", **sec.aiokafka()).stop()

    asyncio.run(build())
    # kafka-python checks its configuration keys in the constructor (no broker needed
    # when api_version is given).
    KafkaProducer(bootstrap_servers="127.0.0.1:1", api_version=(2, 5), max_block_ms=100,
                  **sec.kafka_python()).close(timeout=1)


def test_redis_password_and_tls_files_reach_from_url_arguments() -> None:
    opts = RedisOptions.from_env({"LDP_REDIS_PASSWORD": "pw", "LDP_REDIS_USERNAME": "ldp",
                                  "LDP_REDIS_TLS_CA_FILE": __file__}, url="rediss://h:6380/0")
    assert opts.kwargs() == {"username": "ldp", "password": "pw", "ssl_ca_certs": __file__}
    assert "pw" not in repr(opts).replace("ldp", "")


def test_engine_defaults_to_faust_and_the_cli_flag_sets_it() -> None:
    from ldpctl.cli import build_parser

    assert WorkerSettings.from_env({}).engine == "faust"
    assert WorkerSettings.from_env({"LDP_ENGINE": " AIOKafka "}).engine == "aiokafka"
    args = build_parser().parse_args(["aggregate", "--engine", "aiokafka"])
    assert args.engine == "aiokafka"
    assert build_parser().parse_args(["aggregate"]).engine is None


def test_cli_reports_a_bad_variable_without_a_traceback() -> None:
    proc = subprocess.run([sys.executable, "-m", "ldpstream", "aggregate"], cwd=ROOT,
                          env={"LDP_KAFKA_SECURITY_PROTOCOL": "BOGUS", "PATH": "/usr/bin"},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "LDP_KAFKA_SECURITY_PROTOCOL" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(("interval_ms", "records"), [
    (1000, 100), (5000, 100), (300_000, 6000), (3_600_000, 50_000)])
def test_records_per_poll_are_bounded_by_the_max_poll_interval(
        interval_ms: int, records: int) -> None:
    s = WorkerSettings.from_env({"LDP_MAX_POLL_INTERVAL_MS": str(interval_ms)})
    assert s.poll_records == records
