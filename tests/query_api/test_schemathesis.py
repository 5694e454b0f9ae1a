"""The live API against its own OpenAPI document: schemathesis with every check, 0 failures.

Runs the ``schemathesis`` CLI (``--checks all``, deterministic generation) against a real
``ldpstream serve`` over states the real aggregator wrote, with the admin token, with one
collection per mechanism family (categorical ``grr``, hierarchical range ``hh``, numeric
``sw``): the path's ``cid`` and the domain values (``labels``, ``low``, ``high``) are real
ones of that collection, so answers are real.  The event stream is read (one event) and
checked against its documented event schema.

What each run covers, so that no request is sent twice for nothing:

* ``os``, the full run: every operation of the document, every phase (examples, coverage,
  fuzzing, and the stateful phase that follows the document's links from a created
  collection to its routes).  The routes a ``grr`` collection does not answer are checked
  here for their documented refusal (a 409), the routes that do not depend on a collection
  (``/v1/collections``, ``/v1/fleet``, ``/v1/mechanisms``, health, metrics) only here.
* ``latency`` and ``session``: the routes that collection answers (its ``queries``, as
  ``GET /v1/collections/{cid}`` lists them), ``/series``, ``/stream`` and the collection
  itself, with real answers; phases examples, coverage and fuzzing.

The fuzzing phase draws ``LDP_SCHEMATHESIS_EXAMPLES`` cases per operation (default 5, as
CI runs it; e.g. ``LDP_SCHEMATHESIS_EXAMPLES=50`` for a longer search).  The coverage phase
(every parameter's boundaries, missing and unexpected values, unexpected methods) does not
depend on it.

The only expectations changed from schemathesis' defaults are the documented ones: a spec
valid by the ``CollectionSpec`` schema may break a rule the schema cannot state (listed
in the operation's description, :data:`query_api.spec_schema.SPEC_RULES`), and a fleet
budget may be below what a registered collection's report costs: a 400 that names the
key.  Every other 400 to a schema-valid request is a failure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ldpstream.settings import env_int

from .conftest import ADMIN

pytestmark = [pytest.mark.integration, pytest.mark.any_broker]  # tests the API, not the broker

REAL = {  # one collection per mechanism family, with real values of its domain
    "os": {"labels": "linux", "low": "linux", "high": "win"},
    "latency": {"labels": "40", "low": "10", "high": "200"},
    "session": {"labels": "12.5", "low": "5", "high": "50"},
}
FULL = "os"
"""The collection whose run covers every operation and the stateful phase."""

EXAMPLES = env_int(os.environ, "LDP_SCHEMATHESIS_EXAMPLES", 5, 1, 100_000)
"""Fuzzed cases per operation (the fuzzing phase's ``max-examples``)."""
STATEFUL_EXAMPLES = max(EXAMPLES, 15)
"""Stateful scenarios: enough to reach every link of a created collection, DELETE too."""


def _config(cid: str) -> str:
    params = "\n".join(f'{k} = "{v}"' for k, v in {"cid": cid, **REAL[cid]}.items())
    return f"""
max-stream-events = 1
headers = {{ Authorization = "Bearer {ADMIN}" }}

[generation]
max-examples = {EXAMPLES}

# The scenarios that follow the links from a created collection (its routes, its DELETE).
[phases.stateful.generation]
max-examples = {STATEFUL_EXAMPLES}

[parameters]
{params}

[[operations]]
include-path = "/v1/collections"
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "409"]
# Most specs the schema allows break a rule it cannot state (a documented 400): with fewer
# cases schemathesis warns that the operation mostly rejects its data.
phases.fuzzing.generation.max-examples = {max(EXAMPLES, 15)}

[[operations]]
include-name = "PUT /v1/fleet"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403"]

# The admin token deletes what the run created (the stateful phase follows the link from
# POST), not the collection under test before the other operations have run.
[[operations]]
include-name = "DELETE /v1/collections/{{cid}}"
phases.examples.enabled = false
phases.coverage.enabled = false
phases.fuzzing.enabled = false
"""


def _get(url: str) -> dict[str, object]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {ADMIN}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        body: dict[str, object] = json.loads(resp.read())
    return body


def _selection(api_server: str, cid: str) -> tuple[list[str], int]:
    """The CLI's filter arguments for ``cid``'s run and how many operations it selects."""
    if cid == FULL:
        ops = _get(f"{api_server}/openapi.json")["paths"]
        assert isinstance(ops, dict)
        return [], sum(len(methods) for methods in ops.values())
    queries = _get(f"{api_server}/v1/collections/{cid}")["queries"]
    assert isinstance(queries, list) and queries, queries
    routes = sorted({*map(str, queries), "series", "stream"})
    regex = r"^/v1/collections/\{cid\}(/(" + "|".join(map(re.escape, routes)) + "))?$"
    return ["--include-path-regex", regex, "--exclude-method", "DELETE",
            "--phases", "examples,coverage,fuzzing"], len(routes) + 1


@dataclass
class Run:
    proc: subprocess.Popen[bytes]
    log: Path
    operations: int


@pytest.fixture(scope="module")
def runs(api_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    """The three runs at once: CI has two cores, one run keeps about one busy."""
    started: dict[str, Run] = {}
    try:
        for cid in sorted(REAL):
            tmp = tmp_path_factory.mktemp(f"schemathesis-{cid}")
            config = tmp / "schemathesis.toml"
            config.write_text(_config(cid))
            selection, operations = _selection(api_server, cid)
            cmd = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config),
                   "run", f"{api_server}/openapi.json", "--checks", "all",
                   "--generation-deterministic", "--request-timeout", "10", *selection]
            log = tmp / "out.txt"
            with open(log, "wb") as sink:
                proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, cwd=tmp)
            started[cid] = Run(proc, log, operations)
        yield started
    finally:
        for run in started.values():
            if run.proc.poll() is None:
                run.proc.kill()
                run.proc.wait()


@pytest.mark.parametrize("cid", sorted(REAL))
def test_every_answer_keeps_the_openapi_contract(runs: dict[str, Run], cid: str) -> None:
    run = runs[cid]
    run.proc.wait(timeout=900)
    out = run.log.read_text(errors="replace")
    operations = run.operations
    assert run.proc.returncode == 0, out[-8000:]
    assert "No issues found" in out, out[-3000:]  # no failure, no warning either
    assert "Missing test data" not in out, out[-3000:]
    # Every selected operation was tested, and each by more than a handful of cases.
    assert re.search(rf"Selected: {operations}/\d+\s+Tested: {operations}\b", out), out[-3000:]
    done = re.search(r"(\d+) generated, (\d+) passed", out)
    assert done and done.group(1) == done.group(2), out[-3000:]
    assert int(done.group(1)) > 30 * operations, out[-3000:]
    if cid == FULL:
        assert re.search(r"Stateful", out), out[-3000:]  # the links were followed
