"""The live API against its own OpenAPI document: schemathesis with every check, 0 failures.

Runs the ``schemathesis`` CLI (``--checks all``, deterministic generation, every phase:
examples, coverage, fuzzing and the stateful phase that follows the document's links from
a created collection to its routes) against a real ``ldpstream serve`` over states the
real aggregator wrote, with the admin token, once per kind of collection: the path's
``cid`` and the domain values (``labels``, ``low``, ``high``) are real ones of that
collection, so answers are real.  The event stream is read (one event) and checked against
its documented event schema.

The only expectations changed from schemathesis' defaults are the documented ones: a spec
valid by the ``CollectionSpec`` schema may break a rule the schema cannot state (listed
in the operation's description, :data:`query_api.spec_schema.SPEC_RULES`), and a fleet
budget may be below what a registered collection's report costs: a 400 that names the
key.  Every other 400 to a schema-valid request is a failure.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ADMIN

pytestmark = [pytest.mark.integration, pytest.mark.any_broker]  # tests the API, not the broker

REAL = {  # real values of each collection's domain
    "os": {"labels": "linux", "low": "linux", "high": "win"},
    "latency": {"labels": "40", "low": "10", "high": "200"},
    "session": {"labels": "12.5", "low": "5", "high": "50"},
}


def _config(cid: str) -> str:
    params = "\n".join(f'{k} = "{v}"' for k, v in {"cid": cid, **REAL[cid]}.items())
    return f"""
max-stream-events = 1
headers = {{ Authorization = "Bearer {ADMIN}" }}

[parameters]
{params}

[[operations]]
include-path = "/v1/collections"
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "409"]

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


@pytest.mark.parametrize("cid", sorted(REAL))
def test_every_answer_keeps_the_openapi_contract(api_server: str, tmp_path: Path,
                                                 cid: str) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(_config(cid))
    cmd = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run",
           f"{api_server}/openapi.json", "--checks", "all", "--max-examples", "15",
           "--generation-deterministic", "--request-timeout", "10"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-8000:]
    assert "Missing test data" not in out, out[-3000:]
    done = re.search(r"(\d+) generated, (\d+) passed", out)
    assert done and done.group(1) == done.group(2) and int(done.group(1)) > 300, out[-3000:]
    assert re.search(r"Stateful", out), out[-3000:]  # the links were followed
