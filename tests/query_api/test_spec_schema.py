"""query_api.spec_schema: the JSON Schema of a collection spec agrees with the parser."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from ldpcore.collection import CollectionSpec
from query_api.spec_schema import collection_spec_schema

GOOD: list[dict[str, Any]] = [
    {"id": "os", "oracle": {"mechanism": "grr", "epsilon": 1.0},
     "domain": {"kind": "categories", "labels": ["a", "b"]}},
    {"id": "lat", "oracle": {"mechanism": "sw", "epsilon": 1.0, "bins": 8},
     "domain": {"kind": "interval", "low": 0, "high": 1, "bins": 8}, "window_seconds": 60},
]
BAD: list[dict[str, Any]] = [
    {"id": "os", "oracle": {"mechanism": "grr", "epsilon": 1.0}},  # no domain
    {**GOOD[0], "bogus": 1},
    {**GOOD[0], "oracle": {"mechanism": "nope", "epsilon": 1.0}},
    {**GOOD[1], "domain": {"kind": "categories", "labels": ["a", "b"]}},  # numeric needs interval
    {**GOOD[0], "memoization": "two-level"},  # without epsilon_1
]


def test_the_schema_is_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(collection_spec_schema())


@pytest.mark.parametrize("spec", GOOD, ids=["grr", "sw"])
def test_specs_the_parser_accepts_validate(spec: dict[str, Any]) -> None:
    CollectionSpec.from_dict(spec)
    jsonschema.validate(spec, collection_spec_schema())


@pytest.mark.parametrize("spec", BAD)
def test_specs_the_schema_refuses(spec: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(spec, collection_spec_schema())
