"""The ``ldpstream`` command: its own verbs (experiment, health parsing), the verbs each
service registers, and ``python -m ldpstream``."""

from __future__ import annotations

from pathlib import Path

import pytest

from ldpctl.cli import EXPERIMENTS, build_parser

ROOT = Path(__file__).resolve().parents[2]


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


def test_up_help_says_which_settings_pass_through(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["up", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "every LDP_… variable of your environment is passed" in text
    assert "LDP_REDIS_URL" in text  # one that up sets itself


def test_up_children_get_the_callers_ldp_settings_but_not_those_up_sets() -> None:
    from ldpctl.stack import UP_SETS, child_env

    env, passed = child_env({"LDP_READ_TOKENS": "/t", "LDP_REDIS_URL": "redis://elsewhere",
                             "HOME": "/h"}, {"LDP_REDIS_URL": "redis://127.0.0.1:1"})
    assert env == {"LDP_READ_TOKENS": "/t", "LDP_REDIS_URL": "redis://127.0.0.1:1",
                   "HOME": "/h"}
    assert passed == ["LDP_READ_TOKENS"] and "LDP_REDIS_URL" in UP_SETS


def test_read_token_mints_a_token_and_prints_the_line_of_its_hash(
        capsys: pytest.CaptureFixture[str]) -> None:
    from ldpctl.cli import main
    from ldpstream.access import parse_token_file, token_hash

    assert main(["read-token", "--collections", "sales,hr"]) == 0
    out = capsys.readouterr().out
    token = out.split("token:", 1)[1].split()[0]
    line = out.split("line:", 1)[1].splitlines()[0].strip()
    assert len(token) >= 40 and token not in line
    scope = parse_token_file(line, "printed line")[token_hash(token)]
    assert scope.collections == {"sales", "hr"} and not scope.everything
    assert main(["read-token", "--collections", "bad id"]) == 2


def test_each_service_runs_its_own_verbs() -> None:
    # The top floor collects the verbs; the service that owns one registers it and runs it.
    owners = {"simulate": "producer", "aggregate": "aggregator", "serve": "query_api",
              "gateway": "gateway", "issuer": "issuer"}
    parser = build_parser()
    for verb, service in owners.items():
        args = parser.parse_args([verb])
        assert args.func.__module__.split(".")[0] == service, verb
    benches = {"pipeline": "aggregator", "api": "query_api", "redis-layout": "query_api",
               "gateway": "gateway", "soak": "ldpctl", "freshness": "ldpctl", "scaling": "ldpctl"}
    for bench, package in benches.items():
        args = parser.parse_args(["bench", bench])
        assert args.func.__module__.split(".")[0] == package, bench


def test_python_m_ldpstream_is_the_same_command(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import runpy

    helps = []
    for package in ("ldpstream", "ldpctl"):
        monkeypatch.setattr("sys.argv", [package, "--help"])
        with pytest.raises(SystemExit) as done:
            runpy.run_module(package, run_name="__main__")
        assert done.value.code == 0
        helps.append(capsys.readouterr().out)
    assert helps[0] == helps[1] and "aggregate" in helps[0]
