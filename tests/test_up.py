"""README's first command: ``ldpstream up`` brings the whole stack up and stops it cleanly."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ldpstream.dev.servers import BROKERS, _die_with_parent, free_port

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]


def _get(url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _children(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                         text=True)
    return {int(x) for x in out.stdout.split()}


def _post_with_a_token(issuer_url: str, gport: int, data_dir: Path) -> None:
    """A device of the demo fleet gets a token from up's issuer and posts with it; the same
    token again is refused as a replay."""
    from ldpcore.collection import encode_message
    from ldpstream.collections_file import read_collections_file, select_collection
    from ldpstream.privacypass.client import IssuerClient, device_credential
    from producer.sdk import Device, GatewayClient, GatewayError

    spec = select_collection(read_collections_file(data_dir / "collections.json"),
                             "adult-race")
    issuer = IssuerClient(issuer_url, device_credential(b"up-test-device-secret"))
    (token,) = issuer.tokens(spec.id, issuer.window_now(spec.window_seconds), 1)
    client = GatewayClient(f"http://127.0.0.1:{gport}")
    msg = encode_message(spec, Device(spec).report("White"))
    assert client.post(msg, "application/octet-stream", token=token)["accepted_reports"] == 1
    with pytest.raises(GatewayError) as exc:
        client.post(msg, "application/octet-stream", token=token)
    assert exc.value.reason == "token_replayed"
    client.close()


# The demo devices publish to Kafka on one broker and post through the gateway on the other.
VIA = {"tansu": "gateway", "kafka": "kafka"}


@pytest.mark.parametrize("up_broker", BROKERS)
def test_up_serves_every_demo_collection_and_ctrl_c_stops_every_process(
        up_broker: str, tmp_path: Path) -> None:
    port, gport, iport = free_port(), free_port(), free_port()
    # on the gateway run, the Privacy Pass issuer too (tokens optional: the simulators post
    # without; a device with a token is verified)
    issuer = ["--issuer", "--issuer-port", str(iport)] if VIA[up_broker] == "gateway" else []
    proc = subprocess.Popen([sys.executable, "-m", "ldpstream", "up", "--port", str(port),
                             "--rate", "3000", "--data-dir", str(tmp_path),
                             "--broker", up_broker, "--gateway-port", str(gport),
                             "--via", VIA[up_broker], *issuer], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=_die_with_parent)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        ready: dict[str, int] = {}
        kids: set[int] = set()
        routes = {"app-version": "frequencies?top=3", "adult-race": "frequencies?top=3",
                  "emoji": "frequencies?top=3", "latency-ms": "frequencies?top=3",
                  "session-minutes": "mean"}
        while time.monotonic() < deadline and len(ready) < len(routes):
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            kids |= _children(proc.pid)
            try:
                for cid, route in routes.items():
                    status, body = _get(f"{base}/v1/collections/{cid}/{route}")
                    # an empty collection is answered too (n = 0, with its reason)
                    if status == 200 and int(body["n"]) > 0:  # type: ignore[call-overload]
                        ready[cid] = int(body["n"])  # type: ignore[call-overload]
            except OSError:
                pass
            time.sleep(1)
        assert set(ready) == set(routes), ready
        status, body = _get(f"{base}/v1/collections/latency-ms/quantiles?q=0.5")
        assert status == 200
        status, body = _get(f"{base}/v1/collections/session-minutes/quantiles?q=0.5")
        assert status == 200, body
        assert 0.0 <= body["quantiles"][0]["value"] <= 60.0, body  # type: ignore[index]
        kids |= _children(proc.pid)
        assert len(kids) >= 10  # broker, redis, worker, api, gateway, 5 simulators
        with urllib.request.urlopen(f"http://127.0.0.1:{gport}/metrics", timeout=5) as r:
            metrics = r.read().decode()
        via_gateway = [line for line in metrics.splitlines() if line.startswith(
            'ldp_gateway_reports_accepted_total{collection="app-version"}')]
        if VIA[up_broker] == "gateway":
            assert via_gateway and float(via_gateway[0].split()[-1]) > 0, metrics
            _post_with_a_token(f"http://127.0.0.1:{iport}", gport, tmp_path)
        else:
            assert not via_gateway
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    text = out.decode()
    assert "Dashboard:" in text and f"{base}/" in text and "curl" in text
    assert f"gateway http://127.0.0.1:{gport}/v1/reports" in text
    if issuer:
        assert f"issuer  http://127.0.0.1:{iport}/.well-known/private-token-issuer" in text
    assert proc.returncode == 0, text
    assert "stopped; logs and data kept in" in text  # --data-dir is the user's
    assert ("Apache Kafka" if up_broker == "kafka" else "(tansu") in text
    # what is counted is released where the broker can (the janitor), said where it cannot
    assert "janitor every 30 s" in text
    if up_broker == "kafka":
        assert "deletes the records below the Redis watermarks" in text
    else:
        assert "cannot release counted records" in text
    alive = [pid for pid in kids if Path(f"/proc/{pid}").exists()
             and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()]
    assert not alive, f"processes left running: {alive}"


def test_up_turns_on_the_admin_token_and_removes_its_temporary_directory(
        tmp_path: Path) -> None:
    import os

    from ldpstream.access import token_hash

    port = free_port()
    token = "up-admin-token-1234"
    # A setting of the caller's environment reaches the API: reads need a token.
    tokens = tmp_path / "read-tokens.txt"
    tokens.write_text(f"{token_hash('up-read-token')}\n")
    env = {**os.environ, "LDP_READ_TOKENS": str(tokens)}
    proc = subprocess.Popen([sys.executable, "-m", "ldpstream", "up", "--port", str(port),
                             "--no-simulate", "--admin-token", token, "--broker", "tansu"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=_die_with_parent, env=env)
    base = f"http://127.0.0.1:{port}"
    spec = {"id": "via-admin", "oracle": {"mechanism": "grr", "epsilon": 1.0},
            "domain": {"kind": "categories", "labels": ["a", "b"]}}
    try:
        deadline = time.monotonic() + 90
        created = None
        while time.monotonic() < deadline and created is None:
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            req = urllib.request.Request(f"{base}/v1/collections", method="POST",
                                         data=json.dumps(spec).encode(),
                                         headers={"Authorization": f"Bearer {token}",
                                                  "Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=5) as r:
                    created = r.status
            except OSError:
                time.sleep(0.5)
        assert created == 201
        assert _get(f"{base}/v1/collections")[0] == 401
        req = urllib.request.Request(f"{base}/v1/collections",
                                     headers={"Authorization": "Bearer up-read-token"})
        with urllib.request.urlopen(req, timeout=5) as r:
            assert "via-admin" in r.read().decode()
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    text = out.decode()
    work = Path(text.split("working directory ", 1)[1].split()[0])
    assert proc.returncode == 0, text
    assert f"removed {work}" in text and not work.exists()
    assert "settings from your environment: LDP_READ_TOKENS" in text
