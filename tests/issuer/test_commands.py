"""issuer.commands: ``ldpstream issuer`` and its port flag."""

from __future__ import annotations

import os

import pytest

from issuer import commands

from ..verbs import verbs_parser


def test_the_port_flag_wins_and_start_up_stops_at_bad_settings(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    args = verbs_parser(commands.add_commands).parse_args(["issuer", "--port", "9100"])
    assert args.func is commands._cmd_issuer
    monkeypatch.setenv("LDP_ISSUER_PORT", "1")
    monkeypatch.delenv("LDP_ISSUER_KEYS", raising=False)
    monkeypatch.delenv("LDP_ISSUER_KEYS_FILE", raising=False)
    monkeypatch.delenv("LDP_ISSUER_OPEN", raising=False)
    monkeypatch.delenv("LDP_ISSUER_ATTESTER", raising=False)
    assert args.func(args) == 2
    assert "configuration error: LDP_ISSUER_KEYS" in capsys.readouterr().err
    assert os.environ["LDP_ISSUER_PORT"] == "9100"
