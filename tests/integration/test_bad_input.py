"""Bad input is dead-lettered with its reason and original bytes; counts and worker unaffected."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpcore import Reports, make_oracle, wire
from ldpcore.collection import CollectionSpec, encode_message, message_prefix
from ldpstream.dev.servers import free_port
from ldpstream.storage import CollectionCatalogue, load_state
from producer.sdk import Client

from .helpers import WorkerProcess, read_topic, wait_for, worker_env

pytestmark = pytest.mark.integration

SPEC = CollectionSpec.from_dict({"id": "grr64", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                 "domain": {"kind": "integers", "low": 0, "high": 63}})


def bad_messages() -> list[tuple[str, bytes | None, bytes]]:
    """(expected reason, key, value) for every kind of bad input."""
    o = SPEC.oracle()
    good = encode_message(SPEC, o.perturb(np.arange(10) % 64, rng=1))
    env = message_prefix(SPEC)
    wrong_fp = env[:-16] + b"0" * 16 + good[len(env):]
    other = CollectionSpec.from_dict({**SPEC.to_dict(), "id": "nope"})
    oob = Reports("grr", o.fingerprint, {"y": np.array([3, 64, 2], dtype=np.uint16)})
    oue = make_oracle("oue", epsilon=1.0, domain_size=64)
    wrong_mech = env + wire.encode(oue.perturb([1, 2], rng=2))
    json_oob = json.dumps({"collection": "grr64", "fingerprint": SPEC.fingerprint,
                           "reports": [{"mechanism": "grr", "fingerprint": o.fingerprint,
                                        "y": 99}]}).encode()
    return [
        ("garbage", b"grr64", b"\x00\xffnot a report at all"),
        ("garbage", b"grr64", b'{"collection": "grr64", '),
        ("truncated", b"grr64", good[:-5]),
        ("truncated", b"grr64", good[:8]),
        ("fingerprint", b"grr64", wrong_fp),
        ("unknown_collection", b"nope", encode_message(other, o.perturb([1], rng=3))),
        ("out_of_range", b"grr64", env + wire.encode(oob)),
        ("out_of_range", b"grr64", json_oob),
        ("mechanism", b"grr64", wrong_mech),
        ("key_mismatch", b"other", good),
    ]


def test_every_kind_of_bad_input_is_dead_lettered_and_counts_are_unaffected(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    CollectionCatalogue(redis_client, ldp_names["prefix"]).register(SPEC)
    port = free_port()
    worker = WorkerProcess(worker_env(kafka, redis_server, ldp_names,
                                      LDP_METRICS_PORT=str(port)), tmp_path / "w.log").start()
    oracle = SPEC.oracle()
    expected = oracle.new_state()
    bad = bad_messages()
    try:
        with Client(kafka.bootstrap, ldp_names["topic"]) as client:
            # Interleave good batches with bad ones in one partition, so the fast path
            # must fall back to message-by-message validation.
            for i, (_, key, value) in enumerate(bad):
                batch = oracle.perturb(np.arange(i, i + 50) % 64, rng=i)
                expected += oracle.aggregate(batch)
                client.send(SPEC, batch, partition=0)
                client.send_raw(key, value, partition=0)
            json_client = Client(kafka.bootstrap, ldp_names["topic"], fmt="json")
            batch = oracle.perturb(np.arange(20) % 64, rng=99)
            expected += oracle.aggregate(batch)
            json_client.send(SPEC, batch, partition=1)
            json_client.close()
        wait_for(lambda: load_state(redis_client, SPEC, prefix=ldp_names["prefix"]).n
                 >= expected.n, 60, "good reports counted")
        dlq = read_topic(kafka.bootstrap, ldp_names["dlq"], len(bad))
        got = sorted((dict(m.headers)["ldp-reason"].decode(), m.value) for m in dlq)
        assert got == sorted((reason, value) for reason, _, value in bad)
        for m in dlq:
            assert dict(m.headers)["ldp-error"]
            assert dict(m.headers)["ldp-source"].startswith(ldp_names["topic"].encode())
        state = load_state(redis_client, SPEC, prefix=ldp_names["prefix"])
        assert state == expected
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
        text = metrics.decode()
        assert 'ldp_reports_rejected_total{collection="grr64",reason="fingerprint"}' in text
        assert 'ldp_reports_rejected_total{collection="nope",reason="unknown_collection"}' in text
        assert f'ldp_reports_ingested_total{{collection="grr64"}} {float(expected.n)}' in text
        assert "ldp_flush_seconds_count" in text and "ldp_partition_watermark" in text
        # everything is consumed: every assigned partition's lag is 0; Redis answered
        lags = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                if line.startswith("ldp_consumer_lag{")]
        assert lags and all(x == 0.0 for x in lags), lags
        assert "ldp_redis_up 1.0" in text
        assert "ldp_last_flush_timestamp_seconds" in text
        health = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz",
                                                   timeout=5).read())
        assert health["status"] == "ok" and health["loop_age_seconds"] < 5
        assert worker.alive(), worker.output()
    finally:
        assert worker.stop() == 0, worker.output()
