"""End to end with Privacy Pass on Apache Kafka: SDK devices (Python, TypeScript) obtain
tokens from a real issuer and post through a real gateway (LDP_GATEWAY_TOKENS=required) to a
real worker.  A device limited to k reports per window is counted at most k times however
often it posts (new clients, replayed tokens), and the honest devices' reports are counted
exactly: the state in Redis is the sum of the reports they sent."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpcore import Reports
from ldpcore.collection import CollectionSpec, decode_message, encode_message
from ldpstream.privacypass.client import IssuanceRefused
from ldpstream.storage import CollectionCatalogue, load_state
from producer.sdk import Device, GatewayClient, GatewayError
from producer.store import FileStore

from ..gateway.conftest import GatewayProcess, gateway_env, post
from ..integration.helpers import WorkerProcess, wait_for, worker_env
from ..issuer.conftest import IssuerProcess, issuer_env
from .conftest import JS, _need, java_tool

pytestmark = [pytest.mark.integration, pytest.mark.brokers("kafka")]

K = 2
FLEET = "fleet-key-e2e"
DEAD = "http://127.0.0.1:9"  # an issuer that cannot be reached
LABELS = [f"v{i}" for i in range(8)]


def _spec(sdk: str) -> CollectionSpec:
    return CollectionSpec.from_dict({"id": f"pp-e2e-{sdk}",
                                     "oracle": {"mechanism": "grr", "epsilon": 2.0},
                                     "domain": {"kind": "categories", "labels": LABELS},
                                     "quota": {"reports_per_window": K}})


class Stack:
    def __init__(self, issuer: IssuerProcess, gateway: GatewayProcess, prefix: str) -> None:
        self.issuer, self.gateway, self.prefix = issuer, gateway, prefix


@pytest.fixture(scope="module")
def stack(kafka: Any, redis_server: Any, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[Stack]:
    import redis

    uid = os.urandom(4).hex()
    names = {"prefix": f"ppe{uid}:", "topic": f"ppe-{uid}", "dlq": f"ppe-dlq-{uid}",
             "group": f"ppe-{uid}"}
    client = redis.Redis.from_url(redis_server.url)
    CollectionCatalogue(client, names["prefix"]).register_all([_spec("py"), _spec("js"),
                                                             _spec("java"), _spec("queued")])
    client.close()
    tmp = tmp_path_factory.mktemp("pp-e2e")
    iss = IssuerProcess(issuer_env(redis_server, names, LDP_ISSUER_KEYS=f"app:{FLEET}"),
                        tmp / "issuer.log").start()
    gw = GatewayProcess(gateway_env(kafka, redis_server, names, LDP_GATEWAY_TOKENS="required",
                                    LDP_GATEWAY_KEYS=f"app:{FLEET}"),
                        tmp / "gateway.log").start()
    worker = WorkerProcess(worker_env(kafka, redis_server, names, LDP_ENGINE="aiokafka"),
                           tmp / "worker.log").start()
    try:
        yield Stack(iss, gw, names["prefix"])
    finally:
        worker.stop()
        gw.stop()
        iss.stop()


def _counted(redis_client: Any, spec: CollectionSpec, prefix: str, n: int) -> Any:
    wait_for(lambda: load_state(redis_client, spec, prefix=prefix).n >= n, 120,
             f"{n} reports of {spec.id} counted")
    time.sleep(1.0)  # a report beyond n would have been counted by now too
    return load_state(redis_client, spec, prefix=prefix)


def test_python_device_is_counted_at_most_k_times_and_honest_counts_are_exact(
        stack: Stack, redis_client: Any) -> None:
    spec, honest = _spec("py"), 40
    gw, iss = stack.gateway, stack.issuer
    rng = np.random.default_rng(7)
    sent: list[Reports] = []
    for i in range(honest):
        dev = Device(spec, secret=os.urandom(16))
        with GatewayClient(gw.url(), key=FLEET, issuer_url=iss.url, device_secret=dev.secret,
                           fmt="json" if i % 3 == 0 else "binary") as client:
            reports = dev.report(LABELS[int(rng.integers(0, 8))])
            client.send(spec, reports)
            sent.append(reports)
    # a greedy device: one secret, many posts, a new client, no token at all
    secret = os.urandom(16)
    greedy = GatewayClient(gw.url(), key=FLEET, issuer_url=iss.url, device_secret=secret)
    o = spec.oracle()
    accepted = refused = 0
    for j in range(8):
        reports = o.perturb([7], rng=j)  # it always pushes v7
        try:
            greedy.send(spec, reports)
            accepted += 1
            sent.append(reports)
        except IssuanceRefused as exc:
            assert exc.reason == "quota"
            refused += 1
    assert (accepted, refused) == (K, 8 - K)
    with pytest.raises(IssuanceRefused):
        GatewayClient(gw.url(), key=FLEET, issuer_url=iss.url,
                      device_secret=secret).send(spec, o.perturb([7], rng=99))
    status, _, body = post(gw.port, encode_message(spec, o.perturb([7], rng=5)),
                           headers={"X-LDP-Key": FLEET})
    assert (status, body["reason"]) == (401, "token_missing")
    with pytest.raises(GatewayError):
        GatewayClient(gw.url(), key=FLEET).send(spec, o.perturb([7], rng=6))
    greedy.close()
    state = _counted(redis_client, spec, stack.prefix, honest + K)
    assert state.n == honest + K
    assert state == o.aggregate(Reports.concat(sent))


def test_python_queued_reports_go_with_their_windows_tokens_and_count_once(
        stack: Stack, redis_client: Any, tmp_path: Path) -> None:
    # Queued with its token (issuer up), queued offline (token obtained when sent), binary and
    # JSON; then the answer to one post is "lost" (the entry put back with its spent token):
    # resent, the gateway refuses the replay and the device counts it as delivered, once.
    spec, gw, iss = _spec("queued"), stack.gateway, stack.issuer
    queued: list[bytes] = []
    for i, (fmt, issuer_up) in enumerate([("binary", True), ("json", True), ("binary", False),
                                          ("json", False)]):
        store = FileStore(tmp_path / f"store{i}.json")
        dev = Device(spec, store=store)
        with GatewayClient(gw.url(), key=FLEET, issuer_url=iss.url if issuer_up else DEAD,
                           device_secret=dev.secret) as at_enqueue:
            assert dev.enqueue(LABELS[i], fmt, tokens=at_enqueue)
        (entry,) = store.outbox()
        assert bool(entry.get("token")) is issuer_up
        queued.append(bytes.fromhex(entry["body"]))
        with GatewayClient(gw.url(), key=FLEET, issuer_url=iss.url,
                           device_secret=dev.secret) as client:
            out = client.send_queued(store)
            assert (out["sent"], out["pending"], out["expired"]) == (1, 0, 0), out
            if i == 0:
                doc = store.snapshot()
                assert not doc["outbox"]
                store.transact(lambda d: d["outbox"].append(entry))  # the answer was lost
                again = client.send_queued(store)
                assert (again["sent"], again["refused"], again["pending"]) == (1, 0, 0)
    o = spec.oracle()
    state = _counted(redis_client, spec, stack.prefix, len(queued))
    assert state.n == len(queued)
    assert state == o.aggregate(Reports.concat([decode_message(spec, o, m)[1] for m in queued]))


def _request(tmp_path: Path, stack: Stack, spec: CollectionSpec, honest: int,
             posts: int) -> Path:
    """The file telling an SDK's token tool what to send: ``honest`` reports, then
    ``posts`` greedy ones beyond the quota."""
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"collection": json.loads(spec.to_json()),
                               "gateway": stack.gateway.url(), "issuer": stack.issuer.url,
                               "key": FLEET, "honest": honest, "greedy_posts": posts,
                               "values": [LABELS[i % 8] for i in range(honest)]}))
    return req


def test_typescript_device_is_counted_at_most_k_times(stack: Stack, redis_client: Any,
                                                      tmp_path: Path) -> None:
    index = JS / "dist" / "src" / "index.js"
    _need(index, "the TypeScript SDK")
    spec, honest, posts = _spec("js"), 20, 6
    req = _request(tmp_path, stack, spec, honest, posts)
    proc = subprocess.run(["node", str(Path(__file__).with_name("tokens_device.mjs")),
                           str(index), str(req)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["honest"], out["greedy_accepted"], out["greedy_refused"]) == (
        honest, K, posts - K), out
    assert set(out["reasons"]) == {"quota"}
    state = _counted(redis_client, spec, stack.prefix, honest + K)
    assert state.n == honest + K


def test_java_device_is_counted_at_most_k_times(stack: Stack, redis_client: Any,
                                                tmp_path: Path) -> None:
    spec, honest, posts = _spec("java"), 16, 5
    req = _request(tmp_path, stack, spec, honest, posts)
    proc = subprocess.run([*java_tool("TokensTool"), str(req)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["honest"], out["greedy_accepted"], out["greedy_refused"]) == (
        honest, K, posts - K), out
    assert set(out["reasons"].split(",")) == {"quota"}
    state = _counted(redis_client, spec, stack.prefix, honest + K)
    assert state.n == honest + K
