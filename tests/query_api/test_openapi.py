"""The OpenAPI document says what the service accepts: the collection spec's JSON Schema
accepts every spec the service accepts and refuses what it can state as wrong; error
answers are JSON; admin operations declare their token; a created collection links to
its routes."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ldpcore.collection import CollectionSpec
from producer.demo import demo_collections
from query_api.app import create_app
from query_api.config import ApiSettings

from ..message_cases import SPEC_DICTS
from .conftest import SPECS as API_SPECS
from .test_answer_counts import SPECS as COUNT_SPECS

VECTORS = Path(__file__).resolve().parents[2] / "sdks" / "vectors"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    from openapi_spec_validator import validate

    doc: dict[str, Any] = create_app(ApiSettings()).openapi()
    validate(doc)
    return doc


@pytest.fixture(scope="module")
def spec_validator(document: dict[str, Any]) -> jsonschema.Draft202012Validator:
    schema = document["components"]["schemas"]["CollectionSpec"]
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _known_specs() -> list[dict[str, Any]]:
    raws = [*SPEC_DICTS, *API_SPECS, *(spec for spec, _ in demo_collections())]
    raws += [{"id": cid, **raw} for cid, (raw, _) in COUNT_SPECS.items()]
    for path in sorted(VECTORS.glob("*.json")):
        raws += [case["collection"] for case in json.loads(path.read_text())["cases"]]
    return raws


def test_every_spec_the_service_accepts_fits_the_schema(
        spec_validator: jsonschema.Draft202012Validator) -> None:
    raws = _known_specs()
    assert len(raws) > 80
    for raw in raws:
        spec = CollectionSpec.from_dict(raw)  # the service accepts it...
        for form in (raw, spec.to_dict(), json.loads(spec.to_json())):
            errors = list(spec_validator.iter_errors(form))  # ...and so does the schema
            assert not errors, (raw.get("id"), [e.message for e in errors][:3])


def _base() -> dict[str, Any]:
    return {"id": "os", "oracle": {"mechanism": "grr", "epsilon": 1.0},
            "domain": {"kind": "categories", "labels": ["a", "b"]}}


@pytest.mark.parametrize(("change", "why"), [
    (lambda s: s.pop("domain"), "domain is required"),
    (lambda s: s.update(id="no spaces"), "id pattern"),
    (lambda s: s["oracle"].update(epsilon=40.0), "grr's ε range"),
    (lambda s: s["oracle"].update(mechanism="nope"), "unknown mechanism"),
    (lambda s: s["oracle"].update(colour="red"), "unknown parameter"),
    (lambda s: s["domain"].update(labels=["a"]), "at least two labels"),
    (lambda s: s.update(min_reports=-1), "min_reports >= 0"),
    (lambda s: s.update(memoization="two-level"), "two-level needs epsilon_1"),
    (lambda s: s.update(epsilon_1=1.0), "epsilon_1 only with two-level"),
    (lambda s: s.update(oracle={"mechanism": "sw", "epsilon": 1.0}), "sw needs an interval"),
    (lambda s: s.update(oracle={"mechanism": "ps", "epsilon": 1.0}), "ps needs a length"),
    (lambda s: s.update(oracle={"mechanism": "multi", "epsilon": 1.0}),
     "multi needs attributes"),
])
def test_what_the_schema_can_state_it_refuses_as_the_service_does(
        spec_validator: jsonschema.Draft202012Validator, change: Any, why: str) -> None:
    raw = copy.deepcopy(_base())
    change(raw)
    assert list(spec_validator.iter_errors(raw)), why
    with pytest.raises(Exception):  # noqa: B017 - the service refuses it too
        CollectionSpec.from_dict(raw)


def test_errors_are_json_admin_routes_declare_the_token_and_creation_links_routes(
        document: dict[str, Any]) -> None:
    paths = document["paths"]
    for path, ops in paths.items():
        for method, op in ops.items():
            for status, resp in op.get("responses", {}).items():
                if status[0] in "45":
                    assert list(resp["content"]) == ["application/json"], (path, status)
    create = paths["/v1/collections"]["post"]
    assert create["security"] == [{"adminToken": []}]
    assert paths["/v1/collections/{cid}"]["delete"]["security"] == [{"adminToken": []}]
    assert document["components"]["securitySchemes"]["adminToken"]["scheme"] == "bearer"
    body = create["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/CollectionSpec"}
    links = create["responses"]["201"]["links"]
    ops = {link["operationId"] for link in links.values()}
    for route in ("frequencies", "subset", "series", "stream", "top-items"):
        op = paths[f"/v1/collections/{{cid}}/{route}"]["get"]["operationId"]
        assert op in ops
    assert all(link["parameters"] == {"cid": "$response.body#/spec/id"}
               for link in links.values())
    labels = next(p for p in paths["/v1/collections/{cid}/subset"]["get"]["parameters"]
                  if p["name"] == "labels")
    assert labels["schema"]["items"]["pattern"] == "[^,]"
    assert "cannot state" in create["description"]


def test_the_stream_documents_each_event(document: dict[str, Any]) -> None:
    resp = document["paths"]["/v1/collections/{cid}/stream"]["get"]["responses"]["200"]
    events = resp["content"]["text/event-stream"]["schema"]["oneOf"]
    assert {e["properties"]["event"]["const"] for e in events} == {"estimates", "waiting",
                                                                    "error"}


def test_the_example_specs_are_valid_collections(
        spec_validator: jsonschema.Draft202012Validator) -> None:
    from query_api.openapi import SPEC_EXAMPLES

    for raw in SPEC_EXAMPLES.values():
        CollectionSpec.from_dict(raw)
        assert not list(spec_validator.iter_errors(raw))
