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
JUNIT = ROOT / ".tools" / "sdk-java" / "junit-platform-console-standalone.jar"
SDKS = ("js", "java")


def _need(path: Path, what: str) -> None:
    if not path.exists():
        pytest.fail(f"{what} is not built ({path} missing): run scripts/bootstrap.sh")


def sdk_command(sdk: str) -> list[str]:
    """The command that runs ``sdk``'s batch perturbation tool (args: request, output)."""
    if sdk == "js":
        _need(JS / "dist" / "bin" / "perturb.js", "the TypeScript SDK")
        return [shutil.which("node") or "node", str(JS / "dist" / "bin" / "perturb.js")]
    _need(JAVA / "target" / "classes", "the Java SDK")
    return [shutil.which("java") or "java", "-cp", str(JAVA / "target" / "classes"),
            "org.ldpstream.sdk.tools.Perturb"]


def sdk_perturb(sdk: str, collection: dict[str, Any], values: list[int]) -> bytes:
    """One binary message with the SDK's (CSPRNG) reports of ``values`` (domain indices)."""
    with tempfile.TemporaryDirectory() as tmp:
        req, out = Path(tmp) / "req.json", Path(tmp) / "out.bin"
        req.write_text(json.dumps({"collection": collection, "values": values}))
        proc = subprocess.run([*sdk_command(sdk), str(req), str(out)], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return out.read_bytes()
