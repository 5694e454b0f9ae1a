"""producer.cli (``ldpstream simulate``): arguments checked as they are read, and a run
through a scripted gateway (tests/producer/test_sdk.py) writing its ground truth."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from ldpcore.collection import decode_message
from producer.cli import add_simulate_parser, cmd_simulate

from .standins import Gateway
from .test_sdk import SPEC


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_simulate_parser(parser.add_subparsers(dest="cmd"))
    return parser


@pytest.mark.parametrize("argv", [["--batch-size", "0"], ["--batch-size", "x"],
                                  ["--churn", "1.5"], ["--presence", "0"]])
def test_bad_values_are_refused_when_parsed(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["simulate", *argv])


def test_defaults_and_lists_of_batch_sizes() -> None:
    args = _parser().parse_args(["simulate", "--batch-size", "8,64"])
    assert args.batch_size == [8, 64] and args.func is cmd_simulate
    assert (args.churn, args.presence, args.format) == (0.05, 0.9, "binary")


def test_a_run_without_a_spec_source_says_what_to_give(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LDP_COLLECTIONS_FILE", raising=False)
    with pytest.raises(SystemExit, match="--collections-file"):
        cmd_simulate(_parser().parse_args(["simulate"]))


def test_a_run_through_the_gateway_sends_every_report_and_writes_the_truth(
        gateway: Gateway, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    specs = tmp_path / "c.json"
    specs.write_text(json.dumps({"collections": [SPEC.to_dict()]}))
    truth = tmp_path / "truth.json"
    args = _parser().parse_args([
        "simulate", "--collections-file", str(specs), "--gateway", gateway.url,
        "--reports", "300", "--batch-size", "100", "--seed", "1", "--no-progress",
        "--truth", str(truth)])
    assert cmd_simulate(args) == 0
    oracle = SPEC.oracle()
    sent = sum(len(decode_message(SPEC, oracle, body)[1]) for _, body in gateway.seen)
    assert sent == 300
    out = json.loads(truth.read_text())
    assert out["reports"] == 300 and sum(out["counts"]) == 300 and out["labels"] == ["x", "y", "z"]
    assert "sent 300 reports" in capsys.readouterr().out
