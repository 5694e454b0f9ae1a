"""gateway.app: the gateway's catalogue of decoders, its start-up checks and limits.

The gateway serving real requests: tests/gateway/test_server.py and its neighbours."""

from __future__ import annotations

import asyncio
import resource
import socket

import pytest

from gateway.app import GatewayCatalogue, main, raise_open_files_limit, reachable
from ldpcore.collection import CollectionSpec
from ldpstream.dev.servers import free_port
from ldpstream.settings import ConfigError


def _spec(cid: str, eps: float = 1.0) -> CollectionSpec:
    return CollectionSpec.from_dict({"id": cid, "oracle": {"mechanism": "grr", "epsilon": eps},
                                     "domain": {"kind": "categories", "labels": ["a", "b"]}})


def test_a_catalogue_change_keeps_the_decoders_of_unchanged_collections() -> None:
    cat = GatewayCatalogue(redis=None, prefix="p:", reread=1.0)
    cat._rebuild({"a": _spec("a"), "b": _spec("b")})  # what the client calls on a change
    first = cat.get()
    assert "a" in first and "b" in first and len(first) == 2
    cat._rebuild({"a": _spec("a"), "b": _spec("b", 2.0), "c": _spec("c")})
    second = cat.get()
    assert second is not first  # replaced as a whole: readers never see half of it
    assert second.by_id["a"] is first.by_id["a"]  # unchanged: the same decoder
    assert second.by_id["b"] is not first.by_id["b"] and "c" in second
    assert second.by_bytes[b"c"] is second.by_id["c"]


def test_reachable_is_true_only_for_a_listening_broker() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert asyncio.run(reachable(f"127.0.0.1:{free_port()},127.0.0.1:{port}"))
    assert not asyncio.run(reachable(f"127.0.0.1:{free_port()}", timeout=0.5))


def test_the_open_files_limit_is_raised_within_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert raise_open_files_limit(min(soft, 64)) == min(soft, 64)  # already enough
    want = soft + 16 if hard == resource.RLIM_INFINITY else min(soft + 16, hard)
    assert raise_open_files_limit(want) == want
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= want
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_main_stops_at_a_bad_variable_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LDP_GATEWAY_BATCH_BYTES", "1")
    with pytest.raises(ConfigError, match="LDP_GATEWAY_BATCH_BYTES"):
        main()
