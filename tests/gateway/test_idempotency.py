"""``Idempotency-Key`` on ``POST /v1/reports`` (docs/gateway.md, draft-ietf-httpapi-
idempotency-key-header), against the gateway process, the session's broker and Redis:
a repeat gets the original answer and is counted once; a concurrent duplicate 409; the key
on another body 422; a malformed key 400; keys are per fleet; the Kafka records of a keyed
request are its own and carry the ``ldp-request`` header the aggregator deduplicates on."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpcore.collection import encode_message
from ldpstream.storage import CollectionCatalogue, load_state

from ..integration.helpers import WorkerProcess, read_topic, wait_for, worker_env
from .conftest import SPECS, GatewayProcess, gateway_env, post

pytestmark = pytest.mark.integration

SPEC = SPECS[0]


def _body(seed: int, n: int = 5) -> bytes:
    rng = np.random.default_rng(seed)
    return encode_message(SPEC, SPEC.oracle().perturb(rng.integers(0, 64, n), rng=rng))


def test_a_repeat_gets_the_original_answer_and_the_request_counts_once(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    prefix = ldp_names["prefix"]
    CollectionCatalogue(redis_client, prefix).register_all(SPECS)
    gw = GatewayProcess(gateway_env(kafka, redis_server, ldp_names), tmp_path / "gw.log").start()
    worker = WorkerProcess(worker_env(kafka, redis_server, ldp_names, LDP_ENGINE="aiokafka"),
                           tmp_path / "w.log").start()
    try:
        first = post(gw.port, _body(1), headers={"Idempotency-Key": '"k-1"'})
        assert first[0] == 202 and "idempotent-replayed" not in first[1], first
        again = post(gw.port, _body(1), headers={"Idempotency-Key": '"k-1"'})
        assert again[0] == 202 and again[2] == first[2], again
        assert again[1]["idempotent-replayed"] == "true"
        # the same key on another body: 422; a malformed key: 400 (nothing accepted)
        other = post(gw.port, _body(2), headers={"Idempotency-Key": '"k-1"'})
        assert (other[0], other[2]["reason"]) == (422, "idempotency_key_reused"), other
        for bad in ('""', "x" * 256, "caf\u00e9".encode().decode("latin-1")):
            res = post(gw.port, _body(3), headers={"Idempotency-Key": bad})
            assert (res[0], res[2]["reason"]) == (400, "idempotency_key"), (bad, res)
        plain = post(gw.port, _body(4))  # no key: as before
        assert plain[0] == 202
        expected = first[2]["accepted_reports"] + plain[2]["accepted_reports"]
        wait_for(lambda: load_state(redis_client, SPEC, prefix=prefix).n >= expected, 60,
                 "the accepted reports counted")
        assert load_state(redis_client, SPEC, prefix=prefix).n == expected
        records = read_topic(kafka.bootstrap, ldp_names["topic"], 2)
        tags = [dict(r.headers).get("ldp-request") for r in records]
        assert len(records) == 2 and sum(t is not None for t in tags) == 1, tags
    finally:
        assert gw.stop() == 0, gw.output()
        worker.stop()


def test_a_duplicate_while_the_first_is_in_flight_gets_409_and_keys_are_per_fleet(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    CollectionCatalogue(redis_client, ldp_names["prefix"]).register_all(SPECS)
    # a long linger keeps the first request in flight for a second and a half
    gw = GatewayProcess(gateway_env(kafka, redis_server, ldp_names,
                                    LDP_GATEWAY_LINGER_MS="1500",
                                    LDP_GATEWAY_KEYS="north:key-n,south:key-s"),
                        tmp_path / "gw.log").start()
    try:
        north = {"Authorization": "Bearer key-n", "Idempotency-Key": "same"}
        results: list[Any] = []
        first = threading.Thread(target=lambda: results.append(post(gw.port, _body(5),
                                                                    headers=north)))
        first.start()
        wait_for(lambda: redis_client.keys(f"{ldp_names['prefix']}idem:*") != [], 5,
                 "the first request in flight")
        dup = post(gw.port, _body(5), headers=north)
        assert (dup[0], dup[2]["reason"]) == (409, "idempotency_in_flight"), dup
        assert dup[1]["retry-after"] == "1"
        # the same Idempotency-Key from another fleet is another request
        south = post(gw.port, _body(5), headers={"Authorization": "Bearer key-s",
                                                   "Idempotency-Key": "same"})
        assert south[0] == 202 and "idempotent-replayed" not in south[1], south
        first.join(30)
        assert results and results[0][0] == 202, results
        assert post(gw.port, _body(5), headers=north)[1]["idempotent-replayed"] == "true"
    finally:
        assert gw.stop() == 0, gw.output()
