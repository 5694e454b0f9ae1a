"""The ``ldpstream`` command's own verbs (experiment, health parsing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ldpstream.cli import EXPERIMENTS, build_parser

ROOT = Path(__file__).resolve().parents[1]


def test_every_experiment_names_a_runnable_bench_script() -> None:
    for name, script in EXPERIMENTS.items():
        path = ROOT / "bench" / script
        assert path.is_file(), name
        assert '__name__ == "__main__"' in path.read_text(), name


def test_experiment_passes_the_rest_of_the_line_to_the_script() -> None:
    args = build_parser().parse_args(["experiment", "numeric", "--quick", "--runs", "2"])
    assert args.name == "numeric" and args.rest == ["--quick", "--runs", "2"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["experiment", "no-such-experiment"])
