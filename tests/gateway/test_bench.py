"""gateway.bench (``ldpstream bench gateway``): its options, requests and checks.

The benchmark drives a real gateway for minutes (docs/benchmarks.md, docs/gateway.md)."""

from __future__ import annotations

import argparse
import os

import pytest

from gateway import bench


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench.add_bench_gateway_parser(parser.add_subparsers(dest="what"))
    return parser.parse_args(["gateway", *argv])


def test_the_cases_and_their_defaults() -> None:
    args = _args()
    assert args.func is bench.run_from_args
    assert (args.cases, args.connections, args.depth) == ("single,batch,latency,slow", 64, 16)


def test_token_verifiers_are_checked_and_deduplicated() -> None:
    assert bench._verifiers(_args("--token-verifiers", "openssl, openssl")) == ["openssl"]
    with pytest.raises(SystemExit, match="--token-verifiers: 'gpu'"):
        bench._verifiers(_args("--token-verifiers", "gpu"))


def test_a_request_is_one_pipelinable_http_post() -> None:
    req = bench.http_request("127.0.0.1", 8080, b"abc", "application/octet-stream")
    head, body = req.split(b"\r\n\r\n")
    assert body == b"abc"
    assert head.startswith(b"POST /v1/reports HTTP/1.1\r\nHost: 127.0.0.1:8080")
    assert b"Content-Length: 3" in head


def test_cpu_seconds_of_this_process() -> None:
    sum(range(10**6))
    assert bench._cpu_seconds(os.getpid()) > 0
