"""Device stores move between the SDKs and the Python SDK (producer/store.py) both ways, and
the Python and Java SDKs can share one store at the same time.

A device that reinstalls its app with another SDK, or a test harness in Python, keeps its
secret — so the same permanent answers, derived, not stored — and its cadence and queue: the
store format is shared (docs/wire-format.md §6).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ldpcore import wire
from ldpcore.collection import CollectionSpec, decode_message
from producer.sdk import Device, GatewayClient
from producer.store import FileStore

from ..producer.standins import Gateway, Issuer
from .conftest import SDKS, java_tool, js_tool

SPEC = CollectionSpec.from_dict({"id": "memo-x", "oracle": {"mechanism": "oue", "epsilon": 1.0},
                                 "domain": {"kind": "categories",
                                            "labels": ["red", "green", "blue", "grey"]},
                                 "window_seconds": 100, "reports_per_window": 2})


def _sdk(sdk: str, tmp: Path, value: str, store: Path, now: float,
         spec: CollectionSpec = SPEC, mode: str = "binary", budget: float | None = None) -> str:
    spec_path = tmp / "spec.json"
    spec_path.write_text(spec.to_json())
    cmd = js_tool("message") if sdk == "js" else java_tool("MessageTool")
    extra = [] if budget is None else [str(budget)]
    proc = subprocess.run([*cmd, str(spec_path), value, str(store), str(now), mode, *extra],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def _msg(out: str) -> bytes | None:
    return None if out == "null" else bytes.fromhex(out)


def _records(msg: bytes | None, spec: CollectionSpec = SPEC) -> list[dict[str, object]]:
    assert msg is not None
    return wire.to_records(decode_message(spec, spec.oracle(), msg)[1])


@pytest.mark.parametrize("sdk", SDKS)
def test_python_continues_an_sdk_store(sdk: str, tmp_path: Path) -> None:
    store = tmp_path / "store.json"
    first = _msg(_sdk(sdk, tmp_path, "green", store, 1000.5))
    second = _msg(_sdk(sdk, tmp_path, "green", store, 1001.0))
    assert first is not None and first == second  # permanent: the same answer
    py = Device(SPEC, store=FileStore(store))
    assert py.message("green", now=1050.0) is None  # two made in this window already
    again = py.message("green", now=1100.0)
    assert again is not None and _records(again) == _records(first)
    assert json.loads(store.read_text())["collections"][SPEC.fingerprint]["sent"] == 1


@pytest.mark.parametrize("sdk", SDKS)
def test_an_sdk_continues_a_python_store_and_queues_into_it(sdk: str, tmp_path: Path) -> None:
    store = tmp_path / "store.json"
    py = Device(SPEC, store=FileStore(store))
    first = py.message("blue", now=500.0)
    assert first is not None
    assert _msg(_sdk(sdk, tmp_path, "blue", store, 550.0)) == first  # second of the window
    assert _sdk(sdk, tmp_path, "blue", store, 599.0) == "null"
    later = _msg(_sdk(sdk, tmp_path, "blue", store, 600.0))
    assert _records(later) == _records(first)
    assert _sdk(sdk, tmp_path, "red", store, 700.0, mode="enqueue") == "true"
    (queued,) = FileStore(store).outbox()
    assert _records(bytes.fromhex(queued["body"])) == wire.to_records(py.permanent("red"))
    assert len(queued["key"]) == 36 and queued["type"] == "application/octet-stream"


BUDGETED = CollectionSpec.from_dict({
    "id": "budget-x", "oracle": {"mechanism": "oue", "epsilon": 1.0},
    "domain": {"kind": "categories", "labels": ["red", "green", "blue", "grey"]}})
DAY = 20_000 * 86_400.0  # a UTC midnight


@pytest.mark.parametrize("sdk", SDKS)
def test_the_privacy_ledger_moves_between_an_sdk_and_python(sdk: str, tmp_path: Path) -> None:
    # One ledger in the store: what Python spent the SDK sees, what the SDK spends Python
    # sees; a permanent answer repeated by another SDK is free (the same keyed value tag).
    store = tmp_path / "store.json"
    py = Device(BUDGETED, store=FileStore(store), budget=2.5)
    assert py.message("red", now=DAY) is not None  # a new value: 1.0
    assert _sdk(sdk, tmp_path, "red", store, DAY + 3600, BUDGETED, budget=2.5) != "null"
    assert _sdk(sdk, tmp_path, "green", store, DAY + 7200, BUDGETED, budget=2.5) != "null"
    # no budget given: the stored ledger applies, and a third value (3.0 > 2.5) is refused
    assert _sdk(sdk, tmp_path, "blue", store, DAY + 3 * 3600, BUDGETED) == "null"
    doc: dict[str, Any] = json.loads(store.read_text())
    assert doc["ledger"]["budget"] == 2.5
    assert doc["ledger"]["days"] == {str(int(DAY // 86_400)): {"budget-x": 2.0}}
    counts = doc["collections"][BUDGETED.fingerprint]["reports"]
    assert sorted(counts.values()) == [1, 2]  # red twice, green once; keyed, not named
    assert not {"red", "green", "0", "1"} & set(counts)
    assert (py.cost("red"), py.cost("green"), py.cost("blue")) == (0.0, 0.0, 1.0)
    assert py.message("blue", now=DAY + 4 * 3600) is None
    assert py.message("green", now=DAY + 5 * 3600) is not None
    # the next UTC day: the SDK reports a new value again
    assert _sdk(sdk, tmp_path, "blue", store, DAY + 86_400, BUDGETED, budget=2.5) != "null"
    assert Device(BUDGETED, store=FileStore(store)).ledger.spent(DAY + 86_400) == 1.0


SETS = CollectionSpec.from_dict({
    "id": "apps.candidates", "oracle": {"mechanism": "ps", "epsilon": 1.0, "length": 3},
    "domain": {"kind": "categories", "labels": [f"app{i}" for i in range(70)]},
    "protocol": {"name": "svim", "group": "apps", "phase": "candidates", "k": 4,
                 "epsilon_total": 1.0, "fractions": [0.98, 0.01, 0.01]}})
MULTI = CollectionSpec.from_dict({
    "id": "profile", "oracle": {"mechanism": "multi", "epsilon": 2.0, "sample": 2},
    "domain": {"kind": "attributes", "attributes": [
        {"name": "os", "kind": "categories", "labels": ["linux", "mac", "win"]},
        {"name": "age", "kind": "interval", "low": 0, "high": 100, "bins": 10}]}})


@pytest.mark.parametrize("sdk", SDKS)
def test_sets_tuples_and_the_phase_follow_the_secret_across_sdks(sdk: str,
                                                                 tmp_path: Path) -> None:
    # A set of items beyond bit 63: the answer is derived from the secret the SDK drew.
    store = tmp_path / "sets.json"
    out = _sdk(sdk, tmp_path, '["app69", "app2", "app2"]', store, 10.0, SETS, "permanent")
    py = Device(SETS, store=FileStore(store))
    assert py.secret.hex() == json.loads(store.read_text())["secret"]
    assert wire.to_records(py.permanent(["app2", "app69"]))[0] == {
        "mechanism": "ps", "fingerprint": SETS.oracle().fingerprint, **json.loads(out)}
    first = _msg(_sdk(sdk, tmp_path, '["app69", "app2"]', store, 10.0, SETS))
    assert (first is not None) is py.takes_part()  # ~2 % of secrets are in another phase
    # multi: Python first, the SDK derives the same answer (from a mapping, any order).
    store = tmp_path / "multi.json"
    py = Device(MULTI, store=FileStore(store))
    start = py.message({"os": "mac", "age": 37}, now=0.0)
    later = _msg(_sdk(sdk, tmp_path, '{"age": 31.5, "os": "mac"}', store, 3600.0, MULTI))
    assert _records(later, MULTI) == _records(start, MULTI)


_PY_RACER = """
import json, sys
from ldpcore.collection import CollectionSpec
from producer.sdk import Device
from producer.store import FileStore
path, shared_raw = sys.argv[1], json.loads(sys.argv[2])
store = FileStore(path)
for i in range(30):
    spec = CollectionSpec.from_dict({"id": f"py-{i}", "oracle": {"mechanism": "grr",
        "epsilon": 1.0}, "domain": {"kind": "integers", "low": 0, "high": 2}})
    assert Device(spec, store=store).enqueue(1, now=60.0)
shared = CollectionSpec.from_dict(shared_raw)
made = sum(Device(shared, store=FileStore(path)).enqueue("win", now=60.0) for _ in range(5))
print(made, json.dumps(Device(shared, store=store).permanent("win").columns["y"].tolist()))
"""


def test_python_and_java_share_one_store_at_the_same_time(tmp_path: Path) -> None:
    # Both take the POSIX record lock on <store>.lock: one secret, one report in the window,
    # no lost entry while the two processes interleave.
    store = tmp_path / "store.json"
    shared = {"id": "os", "oracle": {"mechanism": "grr", "epsilon": 1.0, "domain_size": 3},
              "domain": {"kind": "categories", "labels": ["linux", "mac", "win"]},
              "window_seconds": 60}
    java = subprocess.Popen([*java_tool("StoreRacer"), str(store), "jv"], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    py = subprocess.Popen([sys.executable, "-c", _PY_RACER, str(store), json.dumps(shared)],
                          text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    (jout, jerr), (pout, perr) = java.communicate(timeout=300), py.communicate(timeout=300)
    assert java.returncode == 0, jerr
    assert py.returncode == 0, perr
    jmade, janswer = jout.split(" ", 1)
    pmade, panswer = pout.split(" ", 1)
    assert int(jmade) + int(pmade) == 1
    assert json.loads(janswer)["y"] == json.loads(panswer)[0]
    doc: dict[str, Any] = json.loads(store.read_text())
    assert len(doc["outbox"]) == 30 + 30 + 1
    assert len({e["key"] for e in doc["outbox"]}) == 61


QUEUED = CollectionSpec.from_dict({"id": "qt", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                   "domain": {"kind": "categories", "labels": ["a", "b", "c"]},
                                   "window_seconds": 600, "memoization": "none",
                                   "reports_per_window": 3})
T0 = 1_800_000_000  # a window start of QUEUED
DEAD = "http://127.0.0.1:9"


@pytest.mark.parametrize("sdk", SDKS)
def test_python_sends_an_sdk_queued_report_with_the_token_of_its_window(
        sdk: str, tmp_path: Path) -> None:
    # The SDK records the window and its length with the queued report: Python drops the one
    # whose window is over and asks the issuer for the token of the other's window, not now's.
    store = tmp_path / "store.json"
    assert _sdk(sdk, tmp_path, "a", store, T0 - 10, QUEUED, "enqueue") == "true"
    assert _sdk(sdk, tmp_path, "b", store, T0 + 10, QUEUED, "enqueue") == "true"
    assert [(e["window"], e["window_seconds"]) for e in FileStore(store).outbox()] == [
        (T0 - 600, 600), (T0, 600)]
    iss, gw = Issuer([T0 - 600, T0, T0 + 600]), Gateway()
    try:
        out = GatewayClient(gw.url, issuer_url=iss.url, device_secret=bytes(16), retries=0,
                            sleep=lambda s: None).send_queued(FileStore(store), now=T0 + 300)
    finally:
        iss.close()
        gw.server.shutdown()
        gw.server.server_close()
    assert (out["sent"], out["expired"], out["pending"]) == (1, 1, 0)
    assert iss.asked == [T0]
    assert [h["authorization"][:20] for h, _ in gw.seen] == ['PrivateToken token="']


@pytest.mark.parametrize("sdk", SDKS)
def test_an_sdk_sends_a_python_queued_report_with_its_token(sdk: str, tmp_path: Path) -> None:
    # Python queued two reports with their tokens while the issuer was up; the SDK, with no
    # issuer, sends the one whose window is open with its token and drops the other.
    store = tmp_path / "store.json"
    iss = Issuer([T0 - 600, T0])
    try:
        tokens = GatewayClient(DEAD, issuer_url=iss.url, device_secret=bytes(16), retries=0,
                               sleep=lambda s: None)
        dev = Device(QUEUED, store=FileStore(store))
        assert dev.enqueue("a", now=T0 - 10, tokens=tokens)
        assert dev.enqueue("b", now=T0 + 10, tokens=tokens)
    finally:
        iss.close()
    first, second = FileStore(store).outbox()
    assert first["token"] and second["token"]
    gw = Gateway()
    try:
        out = json.loads(_sdk(sdk, tmp_path, gw.url, store, T0 + 300, QUEUED, "send"))
    finally:
        gw.server.shutdown()
        gw.server.server_close()
    assert out == {"sent": 1, "refused": 0, "pending": 0, "expired": 1}
    assert [h["authorization"] for h, _ in gw.seen] == [f'PrivateToken token="{second["token"]}"']
    assert gw.seen[0][1] == bytes.fromhex(second["body"])
    assert FileStore(store).outbox() == []
