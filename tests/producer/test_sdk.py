"""The Python gateway client: Idempotency-Key per request (kept on retries and, for queued
reports, across restarts), Retry-After honoured as stated, the durable outbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ldpcore.collection import CollectionSpec
from producer.sdk import Device, GatewayClient, GatewayError, retry_after_seconds
from producer.store import FileStore

from .standins import Gateway

SPEC = CollectionSpec.from_dict({"id": "net", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                 "domain": {"kind": "categories", "labels": ["x", "y", "z"]},
                                 "window_seconds": 60, "memoization": "none"})
T0 = 1_800_000_000.0


def test_every_request_has_its_own_key_reused_on_its_retries(gateway: Gateway) -> None:
    gateway.script = [(503, {"Retry-After": "0"}), (429, {"Retry-After": "0"})]
    sleeps: list[float] = []
    client = GatewayClient(gateway.url, key="k", sleep=sleeps.append)
    client.post(b"one", "application/octet-stream")
    client.post(b"two", "application/octet-stream")
    keys = gateway.keys()
    assert len(keys) == 4 and keys[0] == keys[1] == keys[2] != keys[3]
    assert all(len(k) == 36 for k in keys)  # a random UUID
    assert gateway.seen[0][0]["authorization"] == "Bearer k"
    assert sleeps == [0.0, 0.0]


def test_retry_after_is_honoured_as_stated_never_cut_short(gateway: Gateway) -> None:
    gateway.script = [(429, {"Retry-After": "7"}), (503, {"Retry-After": "3600"})]
    sleeps: list[float] = []
    client = GatewayClient(gateway.url, sleep=sleeps.append, max_wait=60)
    with pytest.raises(GatewayError) as err:
        client.post(b"m", "application/octet-stream")
    assert sleeps == [7.0]  # waited the 7 s asked; an hour is beyond max_wait: no early retry
    assert err.value.status == 503 and err.value.retry_after == 3600
    assert len(gateway.seen) == 2
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0


def test_queued_reports_survive_restarts_and_keep_their_key(tmp_path: Path,
                                                            gateway: Gateway) -> None:
    path = tmp_path / "store.json"
    dev = Device(SPEC, store=FileStore(path))
    assert dev.enqueue("x", now=T0)
    assert not dev.enqueue("y", now=T0 + 1)  # the window's report is made: cadence spent
    assert dev.enqueue("z", now=T0 + 60)
    queued = FileStore(path).outbox()
    # offline: nothing listens, the reports stay queued
    offline = GatewayClient("http://127.0.0.1:9", retries=1, sleep=lambda s: None)
    assert offline.send_queued(FileStore(path))["pending"] == 2
    # the app restarts; the gateway answers 503 once: the first report is retried later
    gateway.script = [(503, {"Retry-After": "120"})]
    store = FileStore(path)
    out = GatewayClient(gateway.url, max_wait=60).send_queued(store, now=T0 + 100)
    assert out["sent"] == 0 and out["pending"] == 2 and out["not_before"] == T0 + 220
    again = GatewayClient(gateway.url).send_queued(FileStore(path), now=T0 + 200)
    assert again["sent"] == 0 and len(gateway.seen) == 1  # Retry-After: no request before
    done = GatewayClient(gateway.url).send_queued(FileStore(path), now=T0 + 220)
    assert done == {"sent": 2, "refused": 0, "pending": 0, "dropped": 0, "not_before": None}
    # the same bodies, in order, each under the key it was queued with
    assert gateway.keys() == [queued[0]["key"], queued[0]["key"], queued[1]["key"]]
    assert [b for _, b in gateway.seen[1:]] == [bytes.fromhex(e["body"]) for e in queued]


def test_a_refused_report_leaves_the_queue_and_is_counted(tmp_path: Path,
                                                          gateway: Gateway) -> None:
    store = FileStore(tmp_path / "s.json")
    dev = Device(SPEC, store=store)
    assert dev.enqueue("x", now=T0) and dev.enqueue("y", now=T0 + 60)
    gateway.script = [(400, {})]
    out = GatewayClient(gateway.url).send_queued(store)
    assert out["sent"] == 1 and out["refused"] == 1 and out["pending"] == 0
    assert json.loads(store.path.read_text())["refused"] == 1
