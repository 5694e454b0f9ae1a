"""issuer.commands: ``ldpstream issuer`` and its port flag."""

from __future__ import annotations

import argparse
import os

import pytest

from issuer import commands


def test_the_port_flag_wins_and_start_up_stops_at_bad_settings(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    commands.add_commands(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["issuer", "--port", "9100"])
    assert args.func is commands._cmd_issuer
    monkeypatch.setenv("LDP_ISSUER_PORT", "1")
    monkeypatch.delenv("LDP_ISSUER_KEYS", raising=False)
    monkeypatch.delenv("LDP_ISSUER_KEYS_FILE", raising=False)
    monkeypatch.delenv("LDP_ISSUER_OPEN", raising=False)
    monkeypatch.delenv("LDP_ISSUER_ATTESTER", raising=False)
    assert args.func(args) == 2
    assert "configuration error: LDP_ISSUER_KEYS" in capsys.readouterr().err
    assert os.environ["LDP_ISSUER_PORT"] == "9100"
