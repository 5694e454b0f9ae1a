"""The live API against its own OpenAPI document: schemathesis with every check, 0 failures.

Runs the ``schemathesis`` CLI (``--checks all``, deterministic generation) against a
real ``ldpstream serve`` over states the real aggregator wrote, once per kind of
collection (the path's ``cid`` bound to a real collection, so answers are real).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.any_broker]  # tests the API, not the broker


@pytest.mark.parametrize("cid", ["os", "latency", "session"])
def test_every_answer_keeps_the_openapi_contract(api_server: str, tmp_path: Path,
                                                 cid: str) -> None:
    config = tmp_path / "schemathesis.toml"
    # Which values are valid depends on the collection (its labels, its domain, its
    # retention) and on other parameters (since before until): the schema cannot say,
    # so a schema-valid request may be a 400 that names the parameter.  Every other
    # check, and this one's other statuses, stay as they are.
    config.write_text(f'[parameters]\ncid = "{cid}"\n\n'
                      '[checks.positive_data_acceptance]\n'
                      'expected-statuses = ["2xx", "400", "401", "403", "404", "409"]\n')
    cmd = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run",
           f"{api_server}/openapi.json", "--checks", "all", "--max-examples", "15",
           "--generation-deterministic", "--exclude-path-regex", "/stream$",
           "--request-timeout", "10"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "Missing test data" not in out, out[-3000:]
    done = re.search(r"(\d+) generated, (\d+) passed", out)
    assert done and done.group(1) == done.group(2) and int(done.group(1)) > 300, out[-3000:]
