"""Memo files move between the SDKs and the Python SDK (producer/sdk.py) both ways.

A device that reinstalls its app with another SDK, or a test harness in Python, must keep
the same permanent answers and the same cadence: the memo file format is shared.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ldpcore import wire
from ldpcore.collection import CollectionSpec, decode_message
from producer.sdk import Device

from .conftest import JAVA, JS, SDKS, _need

SPEC = CollectionSpec.from_dict({"id": "memo-x", "oracle": {"mechanism": "oue", "epsilon": 1.0},
                                 "domain": {"kind": "categories",
                                            "labels": ["red", "green", "blue", "grey"]},
                                 "window_seconds": 100, "reports_per_window": 2})


def _sdk_message(sdk: str, tmp: Path, value: str, memo: Path, now: float,
                 spec: CollectionSpec = SPEC) -> bytes | None:
    spec_path = tmp / "spec.json"
    spec_path.write_text(spec.to_json())
    if sdk == "js":
        _need(JS / "dist" / "bin" / "message.js", "the TypeScript SDK")
        cmd = [shutil.which("node") or "node", str(JS / "dist" / "bin" / "message.js")]
    else:
        _need(JAVA / "target" / "classes", "the Java SDK")
        cmd = [shutil.which("java") or "java", "-cp", str(JAVA / "target" / "classes"),
               "org.ldpstream.sdk.tools.Message"]
    proc = subprocess.run([*cmd, str(spec_path), value, str(memo), str(now)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.strip()
    return None if out == "null" else bytes.fromhex(out)


def _records(msg: bytes, spec: CollectionSpec = SPEC) -> list[dict[str, object]]:
    return wire.to_records(decode_message(spec, spec.oracle(), msg)[1])


@pytest.mark.parametrize("sdk", SDKS)
def test_python_continues_an_sdk_memo_file(sdk: str, tmp_path: Path) -> None:
    memo = tmp_path / "memo.json"
    first = _sdk_message(sdk, tmp_path, "green", memo, 1000.5)
    second = _sdk_message(sdk, tmp_path, "green", memo, 1001.0)
    assert first is not None and first == second  # permanent memo: the same answer
    py = Device(SPEC, memo_path=memo)
    assert py.message("green", now=1050.0) is None  # two sent in this window already
    again = py.message("green", now=1100.0)
    assert again is not None and _records(again) == _records(first)
    assert json.loads(memo.read_text())["collections"][SPEC.fingerprint]["sent"] == 1


@pytest.mark.parametrize("sdk", SDKS)
def test_an_sdk_continues_a_python_memo_file(sdk: str, tmp_path: Path) -> None:
    memo = tmp_path / "memo.json"
    py = Device(SPEC, memo_path=memo)
    first = py.message("blue", now=500.0)
    assert first is not None
    assert _sdk_message(sdk, tmp_path, "blue", memo, 550.0) == first  # second of the window
    assert _sdk_message(sdk, tmp_path, "blue", memo, 599.0) is None
    later = _sdk_message(sdk, tmp_path, "blue", memo, 600.0)
    assert later is not None and _records(later) == _records(first)


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
def test_set_and_multi_memos_and_the_device_secret_move_both_ways(sdk: str,
                                                                   tmp_path: Path) -> None:
    # A set of items beyond bit 63 (key -1 - bitmask), kept with the device's secret.
    memo = tmp_path / "sets.json"
    first = _sdk_message(sdk, tmp_path, '["app69", "app2", "app2"]', memo, 10.0, SETS)
    entry = json.loads(memo.read_text())["collections"][SETS.fingerprint]
    py = Device(SETS, memo_path=memo)
    assert py.secret is not None and py.secret.hex() == entry["secret"]
    if first is None:  # ~2 % of secrets put the device in another phase: then it never sends
        assert not py.takes_part()
        return
    assert list(entry["answers"]) == [str(-1 - (1 << 69) - (1 << 2))]
    again = py.message(["app2", "app69"], now=4000.0)
    assert again is not None and _records(again, SETS) == _records(first, SETS)
    # multi: Python first, the SDK continues with the same answer (a list or a mapping).
    memo = tmp_path / "multi.json"
    py = Device(MULTI, memo_path=memo)
    start = py.message({"os": "mac", "age": 37}, now=0.0)
    assert start is not None
    later = _sdk_message(sdk, tmp_path, '{"age": 31.5, "os": "mac"}', memo, 3600.0, MULTI)
    assert later is not None and _records(later, MULTI) == _records(start, MULTI)
