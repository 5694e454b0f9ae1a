"""End-to-end fuzz: 10,000+ mutated and valid messages through the real worker on the real broker.

Every mechanism, both formats, keyed and key-less, unknown and non-ASCII keys,
tombstones.  The reference outcome of each message (tests/message_cases.py) says
what the worker must do; then:

* every valid report is counted exactly (every collection's state, cell for cell);
* every invalid message is dead-lettered exactly once, with its reason and its
  original bytes;
* the worker never restarts (one process, alive throughout, no internal errors).
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpcore.collection import CollectionSpec
from ldpstream.storage import CollectionCatalogue, load_state
from producer.sdk import Client
from tests.message_cases import mutate, reference_outcome, specs, valid_message

from .helpers import WorkerProcess, wait_for, worker_env

# each engine on one broker in CI (tests/integration/conftest.py): the parser is the same
pytestmark = [pytest.mark.integration, pytest.mark.diagonal]

N_MESSAGES = 10_500


def _corpus(all_specs: list[CollectionSpec], rng: np.random.Generator
            ) -> list[tuple[bytes | None, bytes | None]]:
    out: list[tuple[bytes | None, bytes | None]] = []
    for i in range(N_MESSAGES):
        spec = all_specs[i % len(all_specs)]
        fmt = "json" if (i // len(all_specs)) % 2 else "binary"
        value: bytes | None = valid_message(spec, rng, fmt)
        if rng.random() < 0.55:
            other = valid_message(all_specs[int(rng.integers(0, len(all_specs)))], rng, fmt)
            value = mutate(value, rng, other)
        key: bytes | None = spec.id.encode()
        r = rng.random()
        if r < 0.05:
            key = None
        elif r < 0.07:
            key = b"no-such-collection"
        elif r < 0.08:
            key = b"\xff\xfe"
        elif r < 0.085:
            value = None  # a tombstone
        out.append((key, value))
    return out


def test_fuzzed_stream_is_counted_exactly_and_every_bad_message_dead_lettered_once(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    from kafka import KafkaConsumer

    all_specs = specs()
    by_id = {s.id: s for s in all_specs}
    CollectionCatalogue(redis_client, ldp_names["prefix"]).register_all(all_specs)
    corpus = _corpus(all_specs, np.random.default_rng(20261123))

    expected = {s.id: s.oracle().new_state() for s in all_specs}
    dead: collections.Counter[tuple[str, bytes]] = collections.Counter()
    for key, value in corpus:
        out = reference_outcome(by_id, key, value if value is not None else b"")
        if out.reason is None:
            assert out.state is not None
            cid = key.decode() if key is not None else out.state and _cid(value)
            expected[cid] += out.state
        else:
            dead[(out.reason, value or b"")] += 1
    n_dead = sum(dead.values())
    assert n_dead > 4000 and N_MESSAGES - n_dead > 4000  # both halves really exercised
    assert len({r for r, _ in dead}) >= 10

    worker = WorkerProcess(worker_env(kafka, redis_server, ldp_names),
                           tmp_path / "w.log").start()
    pid = worker.proc.pid if worker.proc else None
    try:
        with Client(kafka.bootstrap, ldp_names["topic"]) as client:
            for i, (key, value) in enumerate(corpus):
                client.send_raw(key, value, partition=i % 4)  # type: ignore[arg-type]

        def counted() -> bool:
            return all(load_state(redis_client, s, prefix=ldp_names["prefix"]).n
                       >= expected[s.id].n for s in all_specs)

        wait_for(counted, 120, "every valid report counted")
        consumer = KafkaConsumer(ldp_names["dlq"], bootstrap_servers=kafka.bootstrap,
                                 auto_offset_reset="earliest", consumer_timeout_ms=3000,
                                 group_id=None, fetch_max_bytes=64 << 20)
        got: collections.Counter[tuple[str, bytes]] = collections.Counter()
        try:
            for _ in range(60):
                for m in consumer:
                    got[(dict(m.headers)["ldp-reason"].decode(), m.value or b"")] += 1
                if sum(got.values()) >= n_dead:
                    break
            # Anything beyond the expected count would be a duplicate: read a while longer.
            for m in consumer:
                got[(dict(m.headers)["ldp-reason"].decode(), m.value or b"")] += 1
        finally:
            consumer.close()
        assert got == dead, (sum(got.values()), n_dead, (got - dead).most_common(3),
                             (dead - got).most_common(3))
        for s in all_specs:
            assert load_state(redis_client, s, prefix=ldp_names["prefix"]) == expected[s.id], s.id
        assert worker.alive() and worker.proc is not None and worker.proc.pid == pid
        assert "unexpected error" not in worker.output()
    finally:
        assert worker.stop() == 0, worker.output()[-3000:]


def _cid(value: bytes | None) -> str:
    from ldpcore.message import peek_message

    return peek_message(value or b"")[0]
