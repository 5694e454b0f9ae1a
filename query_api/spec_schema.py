"""The collection spec as a JSON Schema (2020-12, as OpenAPI 3.1 embeds it).

``POST /v1/collections`` documents its body with :func:`collection_spec_schema`: the
required keys, every key's type and range, the mechanisms with their ε range and their
own parameters (from each mechanism's constructor and :func:`ldpcore.limits.param_ranges`),
the domain kinds, and the rules between keys JSON Schema can state (``if``/``then``):
numeric mechanisms take an ``interval`` domain, ``multi`` an ``attributes`` one and only
it; two-level memoization needs ``epsilon_1`` and nothing else takes it; a ``ps``/``psi``
collection outside a protocol group declares its padding ``length``.

:data:`SPEC_RULES` lists what the schema cannot state; the operation's description says
them and a spec that breaks one is a 400 naming the key.
"""

from __future__ import annotations

import inspect
from functools import lru_cache
from typing import Any

__all__ = ["collection_spec_schema", "SPEC_RULES"]

MAX_INT = 2**53 - 1
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
ATTRIBUTE_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"

SPEC_RULES = (
    "the domain's size must lie in the mechanism's domain range (GET /v1/mechanisms)",
    "a mechanism's parameters must fit together (OLH's g prime, state sizes, "
    "bins x out_bins, keep x 2^eta, subset_size, inner oracles...; GET /v1/mechanisms)",
    "two-level memoization works for grr, sue, oue, olh, blh and hrr only",
    "a protocol phase's mechanism and epsilon_total must match its phase",
    "multi: oracle.attributes must name the domain's attributes",
    "an id already registered with another spec is a 409",
)
"""What a collection spec must satisfy beyond its JSON Schema."""

_INT_PARAMS = {"domain_size", "g", "m", "fanout", "bins", "out_bins", "bits", "keep", "eta",
               "pool", "hash_seed", "length", "max_size", "subset_size", "max_report_bits",
               "dimensions", "sample"}
_NUMBER_PARAMS = {"b", "low", "high"}
_BOOL_PARAMS = {"smoothing", "consistency", "nonnegative"}
_NUMERIC = ("sw", "pm", "duchi")


def _param_schema(name: str) -> dict[str, Any]:
    if name in _INT_PARAMS:
        return {"type": "integer", "minimum": 0 if name == "hash_seed" else 1,
                "maximum": MAX_INT}
    if name in _NUMBER_PARAMS:
        return {"type": "number", "minimum": -1e300, "maximum": 1e300}
    if name in _BOOL_PARAMS:
        return {"type": "boolean"}
    if name == "candidates":
        return {"type": "array", "minItems": 1, "uniqueItems": True,
                "items": {"type": "integer", "minimum": 0, "maximum": MAX_INT}}
    if name == "itemsets":
        return {"type": "array", "minItems": 1, "items": {
            "type": "array", "minItems": 1, "uniqueItems": True,
            "items": {"type": "integer", "minimum": 0, "maximum": MAX_INT}}}
    if name in ("base", "inner"):
        return {"type": "string"}
    if name == "attributes":
        return {"oneOf": [{"type": "array", "items": {"type": "object"}},
                          {"type": "object"}]}
    if name == "pairs":
        return {"type": "array"}
    return {}


def _oracle_schema(mechanism: str) -> dict[str, Any]:
    from ldpcore.limits import param_ranges
    from ldpcore.registry import oracle_class

    lo, hi = param_ranges().get(mechanism, {}).get("epsilon_bounds", [0.001, 100.0])
    props: dict[str, Any] = {"mechanism": {"const": mechanism},
                             "epsilon": {"type": "number", "minimum": lo, "maximum": hi}}
    try:
        names = [p for p in inspect.signature(oracle_class(mechanism)).parameters
                 if p != "epsilon"]
    except (TypeError, ValueError):
        names = []
    for name in names:
        props[name] = _param_schema(name)
    if mechanism == "ps":
        props["length"] = {"type": "integer", "minimum": 1, "maximum": 4096}
    if mechanism == "hh":
        props["base"] = {"enum": ["oue", "hrr", "olh", "grr"]}
    if mechanism in ("ps", "psi"):
        props["inner"] = {"enum": ["auto", "grr", "olh"]}
    return {"type": "object", "title": mechanism, "required": ["mechanism", "epsilon"],
            "properties": props, "additionalProperties": False}


def _domain_schema() -> dict[str, Any]:
    categories: dict[str, Any] = {"type": "object", "required": ["kind", "labels"],
                  "additionalProperties": False,
                  "properties": {"kind": {"const": "categories"},
                                 "labels": {"type": "array", "minItems": 2, "uniqueItems": True,
                                            "items": {"type": "string"}}}}
    integers: dict[str, Any] = {"type": "object", "required": ["kind", "low", "high"],
                "additionalProperties": False,
                "properties": {"kind": {"const": "integers"},
                               "low": {"type": "integer", "minimum": -MAX_INT,
                                       "maximum": MAX_INT},
                               "high": {"type": "integer", "minimum": -MAX_INT,
                                        "maximum": MAX_INT}}}
    interval: dict[str, Any] = {"type": "object", "required": ["kind", "low", "high", "bins"],
                "additionalProperties": False,
                "properties": {"kind": {"const": "interval"},
                               "low": {"type": "number", "minimum": -1e300, "maximum": 1e300},
                               "high": {"type": "number", "minimum": -1e300, "maximum": 1e300},
                               "bins": {"type": "integer", "minimum": 2,
                                        "maximum": 2**31 - 1}}}
    attribute = {"oneOf": [
        {**d, "required": ["name", *d["required"]],
         "properties": {"name": {"type": "string", "pattern": ATTRIBUTE_PATTERN},
                        **d["properties"]}}
        for d in (categories, integers, interval)]}
    attributes = {"type": "object", "required": ["kind", "attributes"],
                  "additionalProperties": False,
                  "properties": {"kind": {"const": "attributes"},
                                 "attributes": {"type": "array", "minItems": 1, "maxItems": 64,
                                                "items": attribute}}}
    return {"oneOf": [categories, integers, interval, attributes],
            "description": "categories (labels), integers (low..high inclusive), interval "
                           "([low, high] in bins equal bins) or attributes (several of those)"}


def _protocol_schema() -> dict[str, Any]:
    return {"type": "object", "required": ["name", "group", "phase", "k", "epsilon_total"],
            "additionalProperties": False,
            "properties": {
                "name": {"enum": ["svim", "svsm", "ldpminer"]},
                "group": {"type": "string", "minLength": 1, "maxLength": 64},
                "phase": {"enum": ["candidates", "sizes", "frequencies", "itemset-sizes",
                                   "itemsets"]},
                "k": {"type": "integer", "minimum": 1, "maximum": 2048},
                "epsilon_total": {"type": "number", "exclusiveMinimum": 0},
                "fractions": {"type": "array", "items": {"type": "number",
                                                          "exclusiveMinimum": 0}}}}


def _mechanism_is(*names: str) -> dict[str, Any]:
    return {"properties": {"oracle": {"properties": {"mechanism": {"enum": list(names)}},
                                      "required": ["mechanism"]}},
            "required": ["oracle"]}


def _domain_kind_is(kind: str) -> dict[str, Any]:
    return {"properties": {"domain": {"properties": {"kind": {"const": kind}},
                                      "required": ["kind"]}}}


@lru_cache(maxsize=1)
def collection_spec_schema() -> dict[str, Any]:
    """The JSON Schema of a collection spec (see the module notes)."""
    from ldpcore.collection import MAX_REPORTS_PER_WINDOW
    from ldpcore.registry import available_mechanisms

    mechanisms = [m for m in available_mechanisms() if m != "vector"]  # library-only
    count = {"type": "integer", "maximum": MAX_INT}
    return {
        "type": "object", "title": "CollectionSpec",
        "required": ["id", "oracle", "domain"], "additionalProperties": False,
        "properties": {
            "id": {"type": "string", "pattern": ID_PATTERN},
            "description": {"type": "string"},
            "version": {**count, "minimum": 1},
            "oracle": {"oneOf": [_oracle_schema(m) for m in mechanisms],
                       "description": "the mechanism, its ε and its parameters "
                                      "(GET /v1/mechanisms)"},
            "domain": _domain_schema(),
            "window_seconds": {**count, "minimum": 1},
            "retention_seconds": {**count, "minimum": 1},
            "min_reports": {**count, "minimum": 0},
            "memoization": {"enum": ["none", "permanent", "two-level"]},
            "epsilon_1": {"type": "number", "exclusiveMinimum": 0, "maximum": 100},
            "reports_per_window": {"type": "integer", "minimum": 1,
                                   "maximum": MAX_REPORTS_PER_WINDOW},
            "protocol": {"oneOf": [_protocol_schema(), {"type": "null"}]},
            "fingerprint": {"type": "string", "pattern": "^[0-9a-f]{16}$"},
        },
        "allOf": [
            {"if": _mechanism_is(*_NUMERIC), "then": _domain_kind_is("interval")},
            {"if": _mechanism_is("multi"), "then": _domain_kind_is("attributes"),
             "else": {"not": _domain_kind_is("attributes")}},
            {"if": {"properties": {"memoization": {"const": "two-level"}},
                    "required": ["memoization"]},
             "then": {"required": ["epsilon_1"]},
             "else": {"not": {"required": ["epsilon_1"]}}},
            {"if": {**_mechanism_is("ps", "psi"),
                    "not": {"required": ["protocol"]}},
             "then": {"properties": {"oracle": {"required": ["length"]}}}},
        ],
    }
