"""Helpers to run the device SDKs built by scripts/sdks.sh (bootstrap) from pytest."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
JS = ROOT / "sdks" / "js"
JAVA = ROOT / "sdks" / "java"
SDKS = ("js", "java")


def load_script(path: Path, name: str) -> Any:
    """The Python file at ``path`` imported as module ``name`` (the vectors' generators)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _need(path: Path, what: str) -> None:
    if not path.exists():
        pytest.fail(f"{what} is not built ({path} missing): run scripts/bootstrap.sh")


def sdk_command(sdk: str) -> list[str]:
    """The command that runs ``sdk``'s batch perturbation tool (args: request, output)."""
    if sdk == "js":
        _need(JS / "dist" / "bin" / "perturb.js", "the TypeScript SDK")
        return [shutil.which("node") or "node", str(JS / "dist" / "bin" / "perturb.js")]
    return java_tool("PerturbTool")


def java_tool(name: str) -> list[str]:
    """The command of a Java SDK developer tool (in the test classes, not in the jar)."""
    _need(JAVA / "target" / "test-classes", "the Java SDK")
    cp = f"{JAVA / 'target' / 'classes'}:{JAVA / 'target' / 'test-classes'}"
    return [shutil.which("java") or "java", "-cp", cp, f"org.ldpstream.sdk.{name}"]


def js_tool(name: str) -> list[str]:
    """The command of a TypeScript SDK developer tool (dist/bin, not in the package)."""
    _need(JS / "dist" / "bin" / f"{name}.js", "the TypeScript SDK")
    return [shutil.which("node") or "node", str(JS / "dist" / "bin" / f"{name}.js")]


def sdk_perturb_many(sdk: str, requests: list[tuple[dict[str, Any], list[int]]]
                     ) -> list[bytes]:
    """Per (served collection, domain indices): one binary message with the SDK's (CSPRNG)
    reports of the values; all requests in one process (one JVM start)."""
    with tempfile.TemporaryDirectory() as tmp:
        args = []
        for i, (collection, values) in enumerate(requests):
            req, out = Path(tmp) / f"req{i}.json", Path(tmp) / f"out{i}.bin"
            req.write_text(json.dumps({"collection": collection, "values": values}))
            args += [str(req), str(out)]
        proc = subprocess.run([*sdk_command(sdk), *args], capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr
        return [(Path(tmp) / f"out{i}.bin").read_bytes() for i in range(len(requests))]


@pytest.fixture(autouse=True)
def _private_user_data_dir(tmp_path_factory: pytest.TempPathFactory,
                           monkeypatch: pytest.MonkeyPatch) -> Path:
    """Devices keep their store under the user data directory: never the real one here
    (the SDK processes the tests start inherit it)."""
    path = tmp_path_factory.mktemp("user-data")
    monkeypatch.setenv("XDG_DATA_HOME", str(path))
    return path
