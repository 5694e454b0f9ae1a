"""ldpctl.stack: the parts of ``ldpstream up`` that need no server.

``up`` itself, end to end, is in tests/test_up.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from ldpctl.stack import choose_broker


def test_up_falls_back_to_tansu_without_apache_kafkas_jars(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LDP_KAFKA_LIBS", str(tmp_path))  # no kafka_2.13-*.jar there
    assert choose_broker("auto") == "tansu"
    assert choose_broker("kafka") == "kafka"  # an explicit choice is kept (and fails later)
    assert choose_broker("tansu") == "tansu"


def test_children_get_the_callers_ldp_variables_under_up_s_own() -> None:
    from ldpctl.stack import child_env

    env, passed = child_env({"PATH": "/bin", "LDP_READ_TOKENS": "t", "LDP_API_PORT": "1"},
                            {"LDP_API_PORT": "8000", "LDP_REDIS_URL": "redis://x"})
    assert env["LDP_API_PORT"] == "8000" and env["PATH"] == "/bin"
    assert passed == ["LDP_READ_TOKENS"]


def test_the_up_verb_parses_its_flags() -> None:
    import argparse

    from ldpctl.stack import add_up_parser, run_stack

    parser = argparse.ArgumentParser()
    add_up_parser(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["up", "--port", "8123", "--no-simulate", "--via", "gateway"])
    assert (args.port, args.no_simulate, args.via, args.func) == (8123, True, "gateway",
                                                                   run_stack)
    with pytest.raises(SystemExit):
        parser.parse_args(["up", "--via", "carrier-pigeon"])


def test_a_port_in_use_is_not_free() -> None:
    import socket

    from ldpctl.stack import _port_free

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert not _port_free(s.getsockname()[1])
