"""The served OpenAPI document: FastAPI's, made to say what the service accepts and answers.

On top of what the routes declare:

* no 422 (this API answers bad input with a 400 naming the parameter), and every error
  status documented as ``application/json`` :class:`~query_api.schemas.ErrorResponse`;
* ``POST /v1/collections`` takes the collection spec's JSON Schema
  (:mod:`query_api.spec_schema`), the rules the schema cannot state in its description;
  it and ``DELETE /v1/collections/{cid}`` declare the admin bearer token;
* links from a created collection to every route of it (stateful clients and tests follow
  them: create, read, query, delete);
* ``labels`` items, ``low`` and ``high`` may not be empty; quantile levels ``q`` lie in
  [0, 1];
* ``…/stream``: the schema of each Server-Sent Event — ``{event, data, id?, retry?}`` with
  ``data`` the JSON text of an ``estimates``, ``waiting`` or ``error`` body
  (``contentSchema``; :data:`EVENT_DATA`).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from .spec_schema import SPEC_RULES, collection_spec_schema

__all__ = ["build_openapi", "EVENT_DATA", "event_schema"]

_ERROR = {"$ref": "#/components/schemas/ErrorResponse"}
_N = {"n": {"type": "integer", "minimum": 0,
            "description": "reports summed (every report of the range's windows)"},
      "n_effective": {"type": "number", "minimum": 0,
                      "description": "the sample size behind the intervals"}}

EVENT_DATA: dict[str, dict[str, Any]] = {
    "estimates": {
        "type": "object",
        "required": ["collection", "fingerprint", "mechanism", "epsilon", "n", "n_effective",
                     "windows", "state_version"],
        "properties": {"collection": {"type": "string"}, "fingerprint": {"type": "string"},
                       "mechanism": {"type": "string"}, "epsilon": {"type": "number"},
                       **_N, "windows": {"type": "integer", "minimum": 0},
                       "state_version": {"type": "string"},
                       "as_of": {"type": ["string", "null"]},
                       "estimates": {"type": "array", "items": {"type": "object"}},
                       "attributes": {"type": "array", "items": {"type": "object"}}},
        "description": "the collection's live view: its frequencies (or numeric summary, "
                       "heavy hitters, range histogram and CDF, attribute counts) with "
                       "what every answer states"},
    "waiting": {
        "type": "object", "required": ["have", "need", "message", "n", "n_effective"],
        "properties": {"have": {"type": "integer", "minimum": 0},
                       "need": {"type": "integer", "minimum": 0},
                       "message": {"type": "string"}, **_N,
                       "state_version": {"type": "string"}},
        "description": "fewer reports than the collection's minimum so far"},
    "error": {
        "type": "object", "required": ["message"],
        "properties": {"message": {"type": "string"}},
        "description": "Redis is unreachable; the stream goes on and retries"},
}
"""The JSON body (``data:``) of each kind of event of ``…/stream``."""


SPEC_EXAMPLES: dict[str, dict[str, Any]] = {
    "categories": {"id": "example-os", "description": "operating system",
                   "oracle": {"mechanism": "olh", "epsilon": 1.0},
                   "domain": {"kind": "categories", "labels": ["linux", "mac", "win", "bsd"]},
                   "window_seconds": 3600, "min_reports": 1000},
    "numeric": {"id": "example-session", "oracle": {"mechanism": "sw", "epsilon": 1.0},
                "domain": {"kind": "interval", "low": 0.0, "high": 60.0, "bins": 64}},
    "sets": {"id": "example-apps", "oracle": {"mechanism": "ps", "epsilon": 2.0, "length": 4},
             "domain": {"kind": "categories", "labels": ["mail", "maps", "chat", "news"]}},
}
"""Collection specs the document shows (and a stateful client can create)."""


FLEET_POLICY: dict[str, Any] = {
    "type": "object", "required": ["budget"], "additionalProperties": False,
    "properties": {"budget": {"oneOf": [
        {"type": "null"},
        {"type": "object", "additionalProperties": False, "properties": {
            "epsilon_per_day": {"oneOf": [{"type": "null"}, {
                "type": "number", "exclusiveMinimum": 0, "maximum": 1_000_000}]},
            "values_per_day": {"type": "integer", "minimum": 1, "maximum": 1_000_000}}}]}}}
"""The body of ``PUT /v1/fleet`` (``ldpcore.budget.FleetBudget.from_dict``)."""


def event_schema() -> dict[str, Any]:
    """One Server-Sent Event as clients (and schemathesis) parse it."""
    return {"oneOf": [
        {"type": "object", "required": ["event", "data"], "title": f"{name} event",
         "properties": {
             "event": {"const": name},
             "data": {"type": "string", "contentMediaType": "application/json",
                      "contentSchema": body},
             "id": {"type": "string", "description": "the state version (estimates)"},
             "retry": {"type": "integer", "minimum": 0}}}
        for name, body in EVENT_DATA.items()]}


def _nonempty_strings(param: dict[str, Any]) -> None:
    """``labels`` items, ``low`` and ``high``: at least one character other than a comma."""
    schema = param.get("schema", {})
    for branch in [schema, *schema.get("anyOf", [])]:
        if branch.get("type") == "array":
            branch["items"] = {"type": "string", "pattern": "[^,]"}
        elif branch.get("type") == "string":
            branch["minLength"] = 1
            branch["pattern"] = "[^,]" if param["name"] == "labels" else r"\S"


def _levels(param: dict[str, Any]) -> None:
    """``q`` (quantile levels): numbers in [0, 1]."""
    schema = param.get("schema", {})
    for branch in [schema, *schema.get("anyOf", [])]:
        if branch.get("type") == "array":
            branch["items"] = {"type": "number", "minimum": 0, "maximum": 1}


def _links(paths: dict[str, Any]) -> dict[str, Any]:
    """From a created collection (its spec's id) to every operation on it."""
    out = {}
    for path, ops in paths.items():
        if not path.startswith("/v1/collections/{cid}") or path.count("{") > 1:
            continue
        for method, op in ops.items():
            if isinstance(op, dict) and method in ("get", "delete") and "operationId" in op:
                name = op["operationId"].split("_v1_")[0]
                out[f"{method}_{name}"] = {
                    "operationId": op["operationId"],
                    "parameters": {"cid": "$response.body#/spec/id"}}
    return out


def build_openapi(app: FastAPI) -> dict[str, Any]:
    """The document (built once per app)."""
    schema = get_openapi(title=app.title, version=app.version, description=app.description,
                         routes=app.routes)
    components = schema.setdefault("components", {})
    for name in ("HTTPValidationError", "ValidationError"):
        components.get("schemas", {}).pop(name, None)
    components.setdefault("schemas", {})["CollectionSpec"] = collection_spec_schema()
    components["securitySchemes"] = {"adminToken": {
        "type": "http", "scheme": "bearer",
        "description": "the API's LDP_ADMIN_TOKEN (POST and DELETE collections)"}}
    paths = schema.get("paths", {})
    for path, ops in paths.items():
        for method, op in ops.items():
            if not isinstance(op, dict):
                continue
            responses = op.get("responses", {})
            responses.pop("422", None)
            for status, resp in responses.items():
                if status[0] in "45":
                    resp["content"] = {"application/json": {"schema": _ERROR}}
            for param in op.get("parameters", []):
                if param.get("name") in ("labels", "low", "high"):
                    _nonempty_strings(param)
                elif param.get("name") == "q":
                    _levels(param)
            if path == "/v1/collections/{cid}/stream" and method == "get":
                responses["200"]["content"] = {"text/event-stream": {"schema": event_schema()}}
    create = paths["/v1/collections"]["post"]
    create["requestBody"] = {"required": True, "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/CollectionSpec"},
        "examples": {name: {"value": value} for name, value in SPEC_EXAMPLES.items()}}}}
    create["description"] += ("\n\nThe body is a collection spec (schema `CollectionSpec`). "
                              "Rules the schema cannot state (a 400 names the key): "
                              + "; ".join(SPEC_RULES) + ".")
    links = _links(paths)
    for status in ("200", "201"):
        create["responses"][status]["links"] = links
    create["security"] = [{"adminToken": []}]
    paths["/v1/collections/{cid}"]["delete"]["security"] = [{"adminToken": []}]
    fleet = paths.get("/v1/fleet", {}).get("put")
    if fleet is not None:  # the fleet policy (query_api.routes.fleet)
        fleet["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": FLEET_POLICY, "example": {"budget": {"epsilon_per_day": 8}}}}}
        fleet["security"] = [{"adminToken": []}]
        fleet["description"] = (fleet.get("description", "") + "\n\nA rule the schema cannot "
                                "state: a budget below what one report of a registered "
                                "collection costs is a 400 naming the collection.")
    return schema
