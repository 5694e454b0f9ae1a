"""Every kind of bad request gets its 4xx (and nothing of it reaches Kafka); keys, CORS, the
operational routes and the HTTP details, against one gateway per module."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpcore import Reports
from ldpcore.collection import encode_message
from tests.message_cases import specs

from ..integration.helpers import read_topic
from .conftest import SPECS, GatewayProcess, gateway_env, post, running_gateway

pytestmark = [pytest.mark.integration, pytest.mark.any_broker]

OCT, FRAMES, JSON = "application/octet-stream", "application/x-ldp-frames", "application/json"
GRR, OUE = SPECS[0], SPECS[1]
KEY_A, KEY_B = "key-of-fleet-a", "key-of-fleet-b"


def frame(*messages: bytes) -> bytes:
    return b"".join(len(m).to_bytes(4, "little") + m for m in messages)


def good(spec: Any = GRR, n: int = 3, fmt: str = "binary") -> bytes:
    rng = np.random.default_rng(n)
    return encode_message(spec, spec.oracle().perturb(rng.integers(0, spec.domain.size, n),
                                                      rng=rng), fmt)


def grr_values(values: list[int]) -> bytes:
    """A GRR message whose report column holds exactly ``values`` (may be out of range)."""
    o = GRR.oracle()
    col = o.report_columns[0]
    return encode_message(GRR, Reports(o.mechanism, o.fingerprint,
                                       {col.name: np.asarray(values, dtype=col.dtype)}))


def _set(data: bytes, at: int, byte: int) -> bytes:
    return data[:at] + bytes([byte]) + data[at + 1:]


def _json_with(**changes: Any) -> bytes:
    obj = json.loads(good(fmt="json"))
    for k, v in changes.items():
        if v is None:
            obj.pop(k)
        else:
            obj[k] = v
    return json.dumps(obj).encode()


@pytest.fixture(scope="module")
def gw(kafka: Any, redis_server: Any, names: dict[str, str],
       tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    # the fuzz test's collections too, but the last two (it checks unknown ones)
    with running_gateway(kafka, redis_server, names, SPECS + specs()[:-2],
                         tmp_path_factory.mktemp("gw") / "gateway.log",
                         LDP_GATEWAY_MAX_BODY="65536",
                         LDP_GATEWAY_QUEUE_BYTES="1048576") as proc:
        yield proc


BAD_BODIES = [
    # (id, content type, body, status, reason, index)
    ("garbage", OCT, b"hello world", 400, "garbage", 0),
    ("empty", OCT, b"", 400, "truncated", 0),
    ("truncated-envelope", OCT, good()[:10], 400, "truncated", 0),
    ("truncated-columns", OCT, good()[:-1], 400, "truncated", 0),
    ("trailing-bytes", OCT, good() + b"\0", 400, "truncated", 0),
    ("envelope-version", OCT, _set(good(), 4, 9), 400, "version", 0),
    ("fingerprint", OCT, good()[:6 + len(GRR.id)] + b"0123456789abcdef" + good()[22 + len(
        GRR.id):], 400, "fingerprint", 0),
    ("value-out-of-range", OCT, grr_values([1, 64, 2]), 400, "out_of_range", 0),
    ("json-as-octets", OCT, good(fmt="json"), 400, "garbage", 0),
    ("frames-empty", FRAMES, b"", 400, "truncated", 0),
    ("frames-cut-length", FRAMES, frame(good()) + b"\x05\x00", 400, "truncated", 1),
    ("frames-length-past-end", FRAMES, frame(good()) + (999).to_bytes(4, "little") + b"ab",
     400, "truncated", 1),
    ("frames-second-out-of-range", FRAMES, frame(good(), grr_values([70]), good(OUE)), 400,
     "out_of_range", 1),
    ("frames-third-garbage", FRAMES, frame(good(), good(OUE), b"LDPX"), 400, "garbage", 2),
    ("frames-many-one-out-of-range", FRAMES, frame(*[grr_values([i % 64]) for i in range(13)],
                                                   grr_values([64]), grr_values([1])), 400,
     "out_of_range", 13),
    ("json-invalid", JSON, b"{not json", 400, "garbage", 0),
    ("json-scalar", JSON, b"42", 400, "schema", 0),
    ("json-empty-array", JSON, b"[]", 400, "schema", 0),
    ("json-missing-reports", JSON, _json_with(reports=None), 400, "schema", 0),
    ("json-extra-key", JSON, _json_with(extra=1), 400, "schema", 0),
    ("json-fingerprint", JSON, _json_with(fingerprint="0000000000000000"), 400, "fingerprint",
     0),
    ("json-too-deep", JSON, b"[" * 50 + b"]" * 50, 400, "too_large", 0),
    ("json-record-out-of-range", JSON, b"[" + good(fmt="json") + b"," + json.dumps(
        {"collection": GRR.id, "fingerprint": GRR.fingerprint, "reports": [
            {"mechanism": "grr", "fingerprint": GRR.oracle().fingerprint, "y": 99}]}).encode()
     + b"]", 400, "out_of_range", 1),
    ("unknown-collection", OCT, good()[:5] + bytes([4]) + b"nope" + good()[6 + len(GRR.id):],
     404, "unknown_collection", 0),
    ("json-unknown-collection", JSON, b"[" + good(fmt="json") + b"," + _json_with(
        collection="nope") + b"]", 404, "unknown_collection", 1),
    ("media-type", "text/plain", good(), 415, "media_type", None),
    ("no-media-type", "", good(), 415, "media_type", None),
    ("too-large", OCT, b"x" * 70_000, 413, "too_large", None),
]


@pytest.mark.parametrize("ctype,body,status,reason,index",
                         [pytest.param(*case[1:], id=case[0]) for case in BAD_BODIES])
def test_a_bad_body_gets_its_4xx_naming_the_reason(gw: GatewayProcess, ctype: str, body: bytes,
                                                    status: int, reason: str,
                                                    index: int | None) -> None:
    got, headers, answer = post(gw.port, body, ctype)
    assert (got, answer.get("reason")) == (status, reason), answer
    assert answer.get("index") == index, answer
    assert answer["detail"]


def test_bad_requests_leave_nothing_in_kafka_and_good_ones_arrive_rebatched(
        gw: GatewayProcess, kafka: Any, names: dict[str, str]) -> None:
    for case in BAD_BODIES:
        status, _, _ = post(gw.port, case[2], case[1])
        assert status == case[3]
    # All or nothing: a good message of a refused request goes nowhere either.
    status, _, _ = post(gw.port, frame(good(OUE, 5), grr_values([3, 99])), FRAMES)
    assert status == 400
    status, _, answer = post(gw.port, frame(good(GRR, 4), good(GRR, 6)), FRAMES)
    assert (status, answer) == (202, {"accepted_messages": 2, "accepted_reports": 10})
    records = read_topic(kafka.bootstrap, names["topic"], 1)
    assert [r.key for r in records] == [GRR.id.encode()]
    assert GRR.oracle().aggregate(GRR.oracle().validate(
        __import__("ldpcore").message.MessageDecoder(GRR).decode(records[0].value))).n == 10


def test_a_post_without_length_gets_411_and_a_declared_huge_one_413_at_once(
        gw: GatewayProcess) -> None:
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
        s.sendall(b"POST /v1/reports HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  b"application/octet-stream\r\n\r\n")
        head = s.recv(4096)
        assert head.startswith(b"HTTP/1.1 411 "), head
        # The body of a declared 10 MB request is never sent: the answer comes first.
        s.sendall(b"POST /v1/reports HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  b"application/octet-stream\r\nContent-Length: 10000000\r\n\r\n")
        head = s.recv(4096)
        assert head.startswith(b"HTTP/1.1 413 "), head
        assert b"Connection: close" in head


def test_expect_100_continue_is_answered_before_the_body(gw: GatewayProcess) -> None:
    body = good(GRR, 2000)
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
        s.sendall(b"POST /v1/reports HTTP/1.1\r\nHost: x\r\nContent-Type: application/"
                  b"octet-stream\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n"
                  % len(body))
        assert s.recv(4096).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(body)
        data = s.recv(4096)
        assert data.startswith(b"HTTP/1.1 202 "), data
        assert data.endswith(b'{"accepted_messages":1,"accepted_reports":2000}')


def test_a_chunked_body_and_a_media_type_with_parameters_are_accepted(
        gw: GatewayProcess) -> None:
    body = good(OUE, 3, "json")
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (body[:10], body[10:]))
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
        s.sendall(b"POST /v1/reports HTTP/1.1\r\nHost: x\r\nContent-Type: application/json;"
                  b" charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks
                  + b"0\r\n\r\n")
        data = s.recv(4096)
    assert data.startswith(b"HTTP/1.1 202 "), data
    assert data.endswith(b'{"accepted_messages":1,"accepted_reports":3}')


def test_pipelined_requests_are_answered_in_order(gw: GatewayProcess) -> None:
    bodies = [good(GRR, 1), b"junk", good(OUE, 2), good(GRR, 3)]
    raw = b"".join(b"POST /v1/reports HTTP/1.1\r\nHost: x\r\nContent-Type: application/"
                   b"octet-stream\r\nContent-Length: %d\r\n\r\n" % len(b) + b for b in bodies)
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
        s.sendall(raw)
        data = b""
        while data.count(b"HTTP/1.1 ") < 4 or not data.endswith(b"}"):
            chunk = s.recv(65536)
            assert chunk, data
            data += chunk
    statuses = [int(part[:3]) for part in data.split(b"HTTP/1.1 ")[1:]]
    assert statuses == [202, 400, 202, 202]
    assert b'"accepted_reports":2' in data.split(b"HTTP/1.1 ")[3]


def test_operational_routes_and_methods(gw: GatewayProcess) -> None:
    assert post(gw.port, good())[0] == 202
    assert post(gw.port, b"", method="GET", path="/healthz")[0] == 200
    status, _, body = post(gw.port, b"", method="GET", path="/readyz")
    assert (status, body["kafka"], body["redis"]) == (200, True, True)
    assert body["collections"] == len(SPECS) + len(specs()) - 2
    status, _, text = post(gw.port, b"", method="GET", path="/metrics")
    assert status == 200
    assert b'ldp_gateway_requests_total{route="reports",status="202"}' in text
    assert b"ldp_gateway_queue_bytes " in text
    assert b'ldp_gateway_reports_accepted_total{collection="g-grr"}' in text
    import shutil
    import subprocess
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: scripts/system-deps.sh installs it (Debian "
                    "package 'prometheus')")
    out = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                         timeout=60)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
    status, headers, body = post(gw.port, b"", method="GET")
    assert (status, body["reason"], headers["allow"]) == (405, "method", "POST, OPTIONS")
    assert post(gw.port, b"", method="GET", path="/nowhere")[0] == 404


def test_cors_preflight_and_answers_allow_any_origin_by_default(gw: GatewayProcess) -> None:
    status, headers, _ = post(gw.port, b"", method="OPTIONS", headers={
        "Origin": "https://app.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert status == 204
    assert headers["access-control-allow-origin"] == "*"
    assert "POST" in headers["access-control-allow-methods"]
    assert {"authorization", "content-type", "x-ldp-key"} <= {
        h.strip().lower() for h in headers["access-control-allow-headers"].split(",")}
    status, headers, _ = post(gw.port, good(), headers={"Origin": "https://app.example"})
    assert status == 202 and headers["access-control-allow-origin"] == "*"
    status, headers, _ = post(gw.port, b"junk", headers={"Origin": "https://app.example"})
    assert status == 400 and headers["access-control-allow-origin"] == "*"


def test_device_keys_per_fleet_and_listed_cors_origins(
        kafka: Any, redis_server: Any, names: dict[str, str], tmp_path: Path) -> None:
    keyfile = tmp_path / "keys"
    keyfile.write_text(f"# fleet B\nfleetB:{KEY_B}\n")
    env = gateway_env(kafka, redis_server, names, LDP_GATEWAY_KEYS=f"fleetA:{KEY_A}",
                      LDP_GATEWAY_KEYS_FILE=str(keyfile),
                      LDP_GATEWAY_CORS_ORIGINS="https://ok.example")
    gw = GatewayProcess(env, tmp_path / "gw.log").start()
    try:
        status, _, body = post(gw.port, good())
        assert (status, body["reason"]) == (401, "missing_key")
        status, _, body = post(gw.port, good(), headers={"Authorization": "Bearer nope"})
        assert (status, body["reason"]) == (403, "wrong_key")
        assert post(gw.port, good(), headers={"Authorization": f"Bearer {KEY_A}"})[0] == 202
        assert post(gw.port, good(), headers={"X-LDP-Key": KEY_B})[0] == 202
        # the key is checked before the body
        assert post(gw.port, b"junk", headers={"X-LDP-Key": "x"})[0] == 403
        _, headers, _ = post(gw.port, b"", method="OPTIONS",
                             headers={"Origin": "https://ok.example"})
        assert headers["access-control-allow-origin"] == "https://ok.example"
        _, headers, _ = post(gw.port, b"", method="OPTIONS",
                             headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in headers
    finally:
        assert gw.stop() == 0, gw.output()


@pytest.mark.parametrize("env,key", [
    ({"LDP_GATEWAY_KEYS": "nokey"}, "LDP_GATEWAY_KEYS"),
    ({"LDP_GATEWAY_MAX_BODY": "lots"}, "LDP_GATEWAY_MAX_BODY"),
    ({"LDP_GATEWAY_CORS_ORIGINS": "example.com"}, "LDP_GATEWAY_CORS_ORIGINS"),
    ({"LDP_GATEWAY_KEYS_FILE": "/nonexistent"}, "LDP_GATEWAY_KEYS_FILE"),
])
def test_a_bad_setting_stops_the_start_naming_the_variable(
        env: dict[str, str], key: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    from ..integration.helpers import ROOT

    out = subprocess.run([sys.executable, "-m", "ldpstream", "gateway"], cwd=ROOT,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **env},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert key in out.stderr


def test_fuzzed_bodies_over_http_never_get_a_5xx(gw: GatewayProcess) -> None:
    """Runs last in this module: what it gets accepted goes to the module's topic."""
    from hypothesis import HealthCheck, given, settings

    from .test_parse import bodies

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
    @given(bodies)
    def check(case: tuple[str | None, bytes]) -> None:
        ctype, body = case
        status, _, answer = post(gw.port, body, ctype or "")
        assert status in (202, 400, 404, 413, 415), (status, answer)
        if status != 202:
            assert answer["reason"] and answer["detail"]
    check()
    assert post(gw.port, b"", method="GET", path="/healthz")[0] == 200
    _, _, text = post(gw.port, b"", method="GET", path="/metrics")
    assert b'ldp_gateway_requests_total{route="reports",status="202"}' in text


def test_malformed_http_gets_400_and_a_closed_connection_and_the_gateway_lives_on(
        gw: GatewayProcess) -> None:
    rng = np.random.default_rng(4)
    garbage = [b"GARBAGE\r\n\r\n", b"POST /v1/reports HTTP/9.9\r\n\r\n",
               b"POST /v1/reports HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
               b"POST /v1/reports HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
               b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
               *(bytes(rng.integers(0, 256, int(rng.integers(1, 200)), dtype=np.uint8))
                 for _ in range(30))]
    for raw in garbage:
        with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
            s.sendall(raw + b"\r\n\r\n")
            data = b""
            while chunk := s.recv(4096):
                data += chunk
        assert data.startswith((b"HTTP/1.1 400 ", b"HTTP/1.1 404 ")), (raw, data)
    assert post(gw.port, b"", method="GET", path="/healthz")[0] == 200
