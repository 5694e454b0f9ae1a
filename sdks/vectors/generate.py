"""Generate the shared SDK test vectors (``sdks/vectors/<mechanism>.json``) from ldpcore.

Every case holds a collection (its served JSON form, with the fingerprint), the canonical
text whose SHA-256 prefix is that fingerprint, the oracle's canonical spec and
fingerprint, the raw inputs and their domain indices, a fixed stream of u32 words, the
reports :func:`ldpcore.reference.perturb_reference` draws from it (JSON records), and the
message bytes (binary, as hex) and JSON text of :func:`ldpcore.message.encode_message`.
Two-level cases also hold the permanent answers and the re-randomized reports (same
stream, continued).  Format: ``docs/wire-format.md``.

``permanent/permanent.json`` holds the permanent answers each case's inputs get from a
device secret (:class:`ldpcore.reference.PermanentWords`: HMAC-SHA256 over the collection
fingerprint and the value), and ``limits/limits.json`` the parameter ranges ldpcore
accepts, which each SDK enforces on a served spec; the generator also writes them into
the SDKs' sources (``sdks/js/src/limits.ts``, ``sdks/java/.../LimitsData.java``).

Run ``python sdks/vectors/generate.py`` to rewrite the files (``--check`` compares instead);
``tests/sdks/test_vectors.py`` runs the check.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ldpcore import wire
from ldpcore.base import canonical_json
from ldpcore.collection import CollectionSpec
from ldpcore.longitudinal import TwoLevel
from ldpcore.message import encode_message
from ldpcore.reference import (
    NumpyWords,
    PermanentWords,
    WordStream,
    perturb_reference,
    rerandomize_reference,
)
from ldpcore.registry import make_oracle
from ldpcore.setvalued.phases import PHASES, device_phase
from ldpstream.dev.generated import write_or_check

HERE = Path(__file__).resolve().parent
SDKS = HERE.parent
FORMAT = "ldpstream-sdk-vectors"
VERSION = 1


def _cat(n: int) -> dict[str, Any]:
    return {"kind": "categories", "labels": [f"v{i}" for i in range(n)]}


def _ints(lo: int, hi: int) -> dict[str, Any]:
    return {"kind": "integers", "low": lo, "high": hi}


def _interval(lo: float, hi: float, bins: int) -> dict[str, Any]:
    return {"kind": "interval", "low": lo, "high": hi, "bins": bins}


# (name, collection declaration, inputs); inputs are labels / numbers of the domain.
CASES: list[tuple[str, dict[str, Any], list[Any]]] = [
    ("grr-labels", {"oracle": {"mechanism": "grr", "epsilon": 1.0}, "domain": _cat(5)},
     ["v0", "v4", "v2", "v2", "v1", "v3"]),
    ("grr-integers", {"oracle": {"mechanism": "grr", "epsilon": 3.5},
                      "domain": _ints(-10, 89), "window_seconds": 60},
     [-10, 0, 89, 42, 42, 7]),
    ("grr-wide", {"oracle": {"mechanism": "grr", "epsilon": 0.25},
                  "domain": _ints(0, 70000), "description": "caf\u00e9 \u2615 \"q\"\n"},
     [0, 70000, 65536, 12345]),
    ("sue", {"oracle": {"mechanism": "sue", "epsilon": 2.0}, "domain": _cat(10)},
     ["v0", "v9", "v5", "v3"]),
    ("oue", {"oracle": {"mechanism": "oue", "epsilon": 1.0}, "domain": _ints(1, 20),
             "memoization": "none"}, [1, 20, 8, 8, 13]),
    ("blh", {"oracle": {"mechanism": "blh", "epsilon": 1.0}, "domain": _ints(0, 49)},
     [0, 49, 17, 3, 3]),
    ("olh-default-g", {"oracle": {"mechanism": "olh", "epsilon": 2.0}, "domain": _ints(0, 99)},
     [0, 99, 50, 7, 64]),
    ("olh-g5", {"oracle": {"mechanism": "olh", "epsilon": 1.5, "g": 5},
                "domain": _ints(0, 999)}, [0, 999, 500, 124, 625]),
    ("hr", {"oracle": {"mechanism": "hr", "epsilon": 1.0}, "domain": _ints(0, 19)},
     [0, 19, 7, 15, 8]),
    ("hrr", {"oracle": {"mechanism": "hrr", "epsilon": 1.0}, "domain": _ints(0, 99)},
     [0, 99, 64, 63, 1]),
    ("ss", {"oracle": {"mechanism": "ss", "epsilon": 1.0}, "domain": _ints(0, 29)},
     [0, 29, 11, 11]),
    ("ss-k3", {"oracle": {"mechanism": "ss", "epsilon": 2.0, "subset_size": 3},
               "domain": _cat(12)}, ["v0", "v11", "v6"]),
    ("cms", {"oracle": {"mechanism": "cms", "epsilon": 2.0}, "domain": _ints(0, 99)},
     [0, 99, 42, 42, 7]),
    ("cms-m5", {"oracle": {"mechanism": "cms", "epsilon": 3.0, "m": 5},
                "domain": _ints(0, 199)}, [0, 199, 124, 125]),
    ("hcms", {"oracle": {"mechanism": "hcms", "epsilon": 2.0}, "domain": _ints(0, 99)},
     [0, 99, 42, 42, 7]),
    ("hcms-gf8", {"oracle": {"mechanism": "hcms", "epsilon": 1.0, "m": 8},
                  "domain": _ints(0, 299)}, [0, 299, 77, 200, 64]),
    ("hh-hrr", {"oracle": {"mechanism": "hh", "epsilon": 1.0}, "domain": _ints(0, 99)},
     [0, 99, 50, 50, 12, 77]),
    ("hh-oue", {"oracle": {"mechanism": "hh", "epsilon": 1.0, "base": "oue", "fanout": 4},
                "domain": _ints(0, 63)}, [0, 63, 17, 40, 33, 5]),
    ("hh-olh", {"oracle": {"mechanism": "hh", "epsilon": 2.0, "base": "olh",
                           "consistency": False}, "domain": _ints(0, 199)},
     [0, 199, 100, 64, 8, 150]),
    ("hh-grr", {"oracle": {"mechanism": "hh", "epsilon": 1.0, "base": "grr", "fanout": 3,
                           "nonnegative": True}, "domain": _ints(0, 25)},
     [0, 25, 13, 9, 20, 2]),
    ("haar", {"oracle": {"mechanism": "haar", "epsilon": 1.0}, "domain": _ints(0, 99)},
     [0, 99, 50, 64, 31, 32]),
    ("sw", {"oracle": {"mechanism": "sw", "epsilon": 2.0}, "domain": _interval(0, 60, 32)},
     [0.0, 60.0, 22.5, 30.0, -3.0, 61.5, 1.875]),
    ("sw-custom", {"oracle": {"mechanism": "sw", "epsilon": 1.0, "out_bins": 64, "b": 0.3,
                              "smoothing": False}, "domain": _interval(-1.5, 2.5, 16)},
     [-1.5, 2.5, 0.0, 0.7]),
    ("pm", {"oracle": {"mechanism": "pm", "epsilon": 1.0}, "domain": _interval(-5, 5, 10)},
     [-5.0, 5.0, 0.0, 2.5, -1.25]),
    ("duchi", {"oracle": {"mechanism": "duchi", "epsilon": 1.0},
               "domain": _interval(0, 1, 4)}, [0.0, 1.0, 0.5, 0.3]),
    ("pem-small", {"oracle": {"mechanism": "pem", "epsilon": 2.0, "bits": 16, "keep": 8,
                              "eta": 4, "pool": 32, "hash_seed": 5},
                   "domain": _ints(0, 2**16 - 1)}, [0, 65535, 4660, 4660, 300]),
    ("pem-32", {"oracle": {"mechanism": "pem", "epsilon": 4.0, "bits": 32},
                "domain": _ints(0, 2**32 - 1)}, [0, 2**32 - 1, 777777, 3000000000]),
    # Two-level memoization: permanent answers, then one re-randomized report each.
    ("two-level-grr", {"oracle": {"mechanism": "grr", "epsilon": 3.0}, "domain": _cat(6),
                       "memoization": "two-level", "epsilon_1": 1.0},
     ["v0", "v5", "v2"]),
    ("two-level-sue", {"oracle": {"mechanism": "sue", "epsilon": 4.0}, "domain": _cat(9),
                       "memoization": "two-level", "epsilon_1": 2.0}, ["v0", "v8", "v4"]),
    ("two-level-oue", {"oracle": {"mechanism": "oue", "epsilon": 4.0}, "domain": _ints(0, 11),
                       "memoization": "two-level", "epsilon_1": 1.5, "reports_per_window": 3},
     [0, 11, 6]),
    ("two-level-olh", {"oracle": {"mechanism": "olh", "epsilon": 3.0},
                       "domain": _ints(0, 99), "memoization": "two-level",
                       "epsilon_1": 1.0}, [0, 99, 31]),
    ("two-level-blh", {"oracle": {"mechanism": "blh", "epsilon": 2.0},
                       "domain": _ints(0, 15), "memoization": "two-level",
                       "epsilon_1": 0.5}, [0, 15, 9]),
    ("two-level-hrr", {"oracle": {"mechanism": "hrr", "epsilon": 2.0}, "domain": _ints(0, 40),
                       "memoization": "two-level", "epsilon_1": 1.0}, [0, 40, 17]),
    # Set-valued collections: an input is a set of labels (values: item indices).
    ("ps-grr", {"oracle": {"mechanism": "ps", "epsilon": 2.0, "length": 3}, "domain": _cat(8)},
     [["v0", "v1"], [], ["v2"], [f"v{i}" for i in range(8)], ["v7", "v0", "v7"],
      ["v3", "v5", "v6"]]),
    ("ps-olh-candidates", {"oracle": {"mechanism": "ps", "epsilon": 1.0, "length": 4,
                                      "inner": "olh", "candidates": [3, 17, 0, 9, 12]},
                           "domain": _ints(0, 19)},
     [[3, 17], [1, 2], [0, 3, 9, 12, 17, 19], [12], []]),
    ("ps-svim-candidates", {"oracle": {"mechanism": "ps", "epsilon": 1.5, "length": 2},
                            "domain": _cat(6), "protocol": {
                                "name": "svim", "group": "news", "phase": "candidates", "k": 2,
                                "epsilon_total": 1.5}},
     [["v0", "v3"], ["v5"], ["v1", "v2", "v4"]]),
    ("ps-ldpminer", {"oracle": {"mechanism": "ps", "epsilon": 1.0, "length": 2, "inner": "olh",
                                "candidates": [0, 2, 4]}, "domain": _cat(6), "protocol": {
                                    "name": "ldpminer", "group": "web", "phase": "frequencies",
                                    "k": 2, "epsilon_total": 2.0}},
     [["v0", "v2"], ["v1"], ["v0", "v2", "v4", "v5"]]),
    ("psi", {"oracle": {"mechanism": "psi", "epsilon": 2.0, "length": 2,
                        "itemsets": [[0, 1], [2], [1, 3, 4]]}, "domain": _cat(5)},
     [["v0", "v1", "v2"], ["v1", "v3", "v4", "v0"], ["v4"], [], ["v2"]]),
    ("psi-svsm-itemsets", {"oracle": {"mechanism": "psi", "epsilon": 1.0, "length": 1,
                                      "itemsets": [[0, 1], [1, 2]]}, "domain": _cat(4),
                           "protocol": {"name": "svsm", "group": "emoji", "phase": "itemsets",
                                        "k": 1, "epsilon_total": 1.0,
                                        "fractions": [0.3, 0.1, 0.2, 0.1, 0.3]}},
     [["v0", "v1", "v2"], ["v3"]]),
    ("setsize-candidates", {"oracle": {"mechanism": "setsize", "epsilon": 2.0, "max_size": 3,
                                       "candidates": [0, 1, 2, 4]}, "domain": _cat(6)},
     [["v0", "v1", "v2", "v4"], ["v3", "v5"], ["v1"], ["v0", "v4"]]),
    ("setsize-itemsets-oue", {"oracle": {"mechanism": "setsize", "epsilon": 1.0, "inner": "oue",
                                         "itemsets": [[0, 1], [2, 3], [1]]},
                              "domain": _ints(0, 3)}, [[0, 1, 2, 3], [1], [2], []]),
    ("setsize-ss-default", {"oracle": {"mechanism": "setsize", "epsilon": 0.5, "inner": "ss",
                                       "max_size": 9}, "domain": _ints(0, 11)},
     [list(range(12)), [3, 4], [], [0, 1, 2, 5, 6]]),
    ("setsize-hcms-default", {"oracle": {"mechanism": "setsize", "epsilon": 1.0,
                                         "inner": "hcms", "max_size": 20},
                              "domain": _ints(0, 29)}, [list(range(0, 30, 2)), [7], []]),
    ("setsize-cms-default", {"oracle": {"mechanism": "setsize", "epsilon": 2.0,
                                        "inner": "cms", "max_size": 12}, "domain": _ints(0, 19)},
     [list(range(15)), [1, 2, 3], [19]]),
    ("setsize-svim-sizes", {"oracle": {"mechanism": "setsize", "epsilon": 3.0,
                                       "candidates": [1, 2, 3]}, "domain": _cat(5),
                            "protocol": {"name": "svim", "group": "news", "phase": "sizes",
                                         "k": 2, "epsilon_total": 3.0}},
     [["v1", "v2"], ["v0"], ["v1", "v2", "v3", "v4"]]),
    # Multi-attribute collections: an input is a mapping attribute -> value.
    ("multi", {"oracle": {"mechanism": "multi", "epsilon": 2.0, "sample": 2},
               "domain": {"kind": "attributes", "attributes": [
                   {"name": "os", "kind": "categories", "labels": ["linux", "mac", "win"]},
                   {"name": "age", "kind": "interval", "low": 0, "high": 100, "bins": 10},
                   {"name": "n", "kind": "integers", "low": 1, "high": 40}]}},
     [{"os": "mac", "age": 37, "n": 1}, {"os": "win", "age": 100.0, "n": 40},
      {"os": "linux", "age": 0.5, "n": 17}, {"os": "mac", "age": 64.5, "n": 3}]),
    ("multi-pairs", {"oracle": {"mechanism": "multi", "epsilon": 3.0, "sample": 1,
                                "attributes": [{"mechanism": "oue"}, {"mechanism": "duchi"},
                                               {"mechanism": "sw", "out_bins": 8, "b": 0.25}],
                                "pairs": [["a", "c"]]},
                     "domain": {"kind": "attributes", "attributes": [
                         {"name": "a", "kind": "categories", "labels": ["x", "y", "z"]},
                         {"name": "b", "kind": "interval", "low": -1.5, "high": 1.5, "bins": 4},
                         {"name": "c", "kind": "interval", "low": 0, "high": 1, "bins": 5}]}},
     [{"a": "x", "b": -1.5, "c": 0.0}, {"a": "z", "b": 1.5, "c": 1.0},
      {"a": "y", "b": 0.2, "c": 0.5}, {"a": "x", "b": 0.8, "c": 0.3},
      {"a": "z", "b": -0.4, "c": 0.9}, {"a": "y", "b": 1.0, "c": 0.1}]),
    ("multi-all", {"oracle": {"mechanism": "multi", "epsilon": 4.0, "sample": 3,
                              "attributes": {"h": {"mechanism": "hrr"},
                                             "s": {"mechanism": "cms", "m": 5},
                                             "o": {"mechanism": "olh", "g": 3}}},
                   "domain": {"kind": "attributes", "attributes": [
                       {"name": "h", "kind": "integers", "low": 0, "high": 99},
                       {"name": "s", "kind": "integers", "low": 0, "high": 29},
                       {"name": "o", "kind": "categories", "labels": ["p", "q", "r", "t"]}]}},
     [{"h": 0, "s": 29, "o": "p"}, {"h": 99, "s": 0, "o": "t"}, {"h": 42, "s": 17, "o": "r"}]),
]

SECRETS = [bytes.fromhex(h) for h in (
    "00000000000000000000000000000000", "ffffffffffffffffffffffffffffffff",
    "000102030405060708090a0b0c0d0e0f", "5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e",
    "d1f2a3b4c5d6e7f8091a2b3c4d5e6f70", "8badf00d8badf00d8badf00d8badf00d",
    "0123456789abcdef0123456789abcdef", "c0ffee00c0ffee00c0ffee00c0ffee00")]
"""Device secrets of the phase-membership vectors (HMAC-SHA256 keys)."""


def _values(spec: CollectionSpec, inputs: list[Any]) -> list[Any]:
    """The oracle's inputs of raw values: domain indices; item indices of sets; per-attribute
    indices of tuples."""
    if spec.set_valued:
        out: list[Any] = spec.index_sets(inputs).to_lists()
    elif spec.domain.kind == "attributes":
        out = spec.domain.attribute_indices(inputs).tolist()
    else:
        out = spec.domain.index(inputs).tolist()
    return out


def _case(name: str, decl: dict[str, Any], inputs: list[Any], seed: int) -> dict[str, Any]:
    spec = CollectionSpec.from_dict({"id": f"vec.{name}", **decl})
    oracle = spec.oracle()
    values = _values(spec, inputs)
    probe = NumpyWords(seed)
    record: list[int] = []

    class _Recorder:
        def next_u32(self) -> int:
            w = probe.next_u32()
            record.append(w)
            return w

    rec = _Recorder()
    reports = perturb_reference(oracle, values, rec)
    tl = spec.two_level()
    out: dict[str, Any] = {
        "name": name,
        "collection": json.loads(spec.to_json()),
        "canonical": canonical_json(spec.to_dict()),
        "fingerprint": spec.fingerprint,
        "oracle_canonical": canonical_json(dict(spec.oracle_spec)),
        "oracle_fingerprint": oracle.fingerprint,
        "inputs": inputs,
        "values": values,
    }
    if spec.protocol is not None:
        out["phases"] = _phases(spec)
    if tl is not None:
        out["permanent"] = wire.to_records(reports)
        reports = rerandomize_reference(tl, reports, rec)
    # The words are exactly those consumed: replaying them must use every one.
    check = WordStream(record)
    again = perturb_reference(oracle, values, check)
    if tl is not None:
        again = rerandomize_reference(tl, again, check)
    assert again == reports and check.used == len(record)
    _check_margin(spec, values, record, reports)
    out["words"] = record
    out["reports"] = wire.to_records(reports)
    out["message_binary"] = encode_message(spec, reports).hex()
    out["message_json"] = encode_message(spec, reports, "json").decode()
    return out


def _phases(spec: CollectionSpec) -> list[dict[str, Any]]:
    """Per device secret: the phase of the group it takes part in (index, or null when
    every device reports to every phase) and whether that is this collection's phase."""
    proto = spec.protocol
    assert proto is not None
    out = []
    for secret in SECRETS:
        if proto.get("fractions") is None:
            phase, part = None, True
        else:
            phase = device_phase(secret, str(proto["group"]), proto["fractions"])
            part = PHASES[proto["name"]][phase] == proto["phase"]
        out.append({"secret": secret.hex(), "phase": phase, "takes_part": part})
    return out


def _check_margin(spec: CollectionSpec, values: list[Any], words: list[int],
                  reports: Any) -> None:
    """The reports must not change when ε (and ε₁) move by 1e-12 relative: platforms may
    compute exp() an ulp apart (1e-16 relative), which must not decide any draw."""
    for factor in (1 - 1e-12, 1 + 1e-12):
        params = dict(spec.oracle_spec)
        params["epsilon"] = params["epsilon"] * factor
        o = make_oracle(**params)
        src = WordStream(words)
        again = perturb_reference(o, values, src)
        if spec.epsilon_1 is not None:
            tl = TwoLevel(o, epsilon_1=spec.epsilon_1 * factor)
            again = rerandomize_reference(tl, again, src)
        assert wire.to_records(again) == [
            {**r, "fingerprint": o.fingerprint} for r in wire.to_records(reports)], spec.id


def _memo_key(spec: CollectionSpec, value: Any) -> int:
    """The memo key of a domain value: its index; a set's -1 - bitmask; a tuple's mixed radix."""
    if spec.set_valued:
        return -1 - sum(1 << int(i) for i in value)
    if spec.domain.kind == "attributes":
        key = 0
        for (_, dom), i in zip(spec.domain.attributes, value, strict=True):
            key = key * dom.size + int(i)
        return key
    return int(value)


def _permanent_case(name: str, decl: dict[str, Any], inputs: list[Any],
                    secret: bytes) -> dict[str, Any]:
    """The permanent answers a device with ``secret`` derives for ``inputs``."""
    spec = CollectionSpec.from_dict({"id": f"prr.{name}", **decl})
    oracle = spec.oracle()
    values = _values(spec, inputs)
    keys = [_memo_key(spec, v) for v in values]
    if spec.domain.kind == "attributes":  # the key is the domain index of the tuple
        assert keys == spec.domain.index(inputs).tolist()
    records, reports = [], []
    for v, k in zip(values, keys, strict=True):
        rep = perturb_reference(oracle, [v], PermanentWords(secret, spec.fingerprint, k))
        reports.append(rep)
        records.extend(wire.to_records(rep))
    first = PermanentWords(secret, spec.fingerprint, keys[0])
    allrep = _concat(oracle, reports)
    return {"name": name, "collection": json.loads(spec.to_json()), "secret": secret.hex(),
            "inputs": inputs, "values": values, "keys": [str(k) for k in keys],
            "words": [first.next_u32() for _ in range(10)], "permanent": records,
            "message_binary": encode_message(spec, allrep).hex(),
            "message_json": encode_message(spec, allrep, "json").decode()}


def _concat(oracle: Any, reports: list[Any]) -> Any:
    return wire.from_records(oracle, [r for rep in reports for r in wire.to_records(rep)])


def permanent_cases() -> list[dict[str, Any]]:
    """Every case whose collection memoizes (permanent or two-level), each with its own
    secret (32 bytes; two cases with 16 and 64 to pin the key handling)."""
    import hashlib

    out = []
    for name, decl, inputs in CASES:
        if decl.get("memoization") == "none":
            continue
        secret = hashlib.sha256(f"ldpstream vector secret {name}".encode()).digest()
        if name == "grr-labels":
            secret = secret[:16]
        elif name == "olh-default-g":
            secret = secret + hashlib.sha256(secret).digest()
        out.append(_permanent_case(name, decl, inputs, secret))
    return out


def limits() -> dict[str, Any]:
    """The parameter ranges ldpcore accepts that an SDK must enforce on a served spec."""
    from ldpcore.limits import PROB_FLOOR_64, SW_B_MIN, domain_range, epsilon_range
    from ldpcore.longitudinal import EPSILON_1_MAX
    from ldpcore.multi.attributes import MAX_ATTRIBUTES
    from ldpcore.numeric.sw import SW_MAX_OUT_BINS
    from ldpcore.range.hh import BASES
    from ldpcore.registry import MECHANISMS
    from ldpcore.setvalued.ps import MAX_LENGTH

    mechs = sorted(m for m in MECHANISMS if m not in ("adaptive", "vector"))
    return {
        "format": "ldpstream-limits", "version": 1,
        "source": "ldpcore (sdks/vectors/generate.py); see ldpcore/limits.py for the reasons",
        "epsilon": {m: list(epsilon_range(m)) for m in mechs},
        "domain_size": {m: list(domain_range(m)) for m in mechs},
        "epsilon_1": [0.0, EPSILON_1_MAX],
        "integers": {
            "olh": {"g": [2, 1 << 16]}, "cms": {"m": [2, 1 << 16]}, "hcms": {"m": [2, 1 << 12]},
            "hh": {"fanout": [2, 1024]}, "sw": {"out_bins": [2, SW_MAX_OUT_BINS]},
            "pem": {"bits": [4, 62], "keep": [1, 4096], "eta": [1, 16], "pool": [1, 4096]},
            "ps": {"length": [1, MAX_LENGTH]}, "psi": {"length": [1, MAX_LENGTH]},
            "setsize": {"max_size": [1, MAX_LENGTH]}, "multi": {"attributes": [1, MAX_ATTRIBUTES]},
        },
        "reals": {"sw": {"b": [SW_B_MIN, 10.0]}},
        "choices": {"hh": {"base": list(BASES)}},
        "probability_floor": PROB_FLOOR_64,
    }


def _js_limits(doc: dict[str, Any]) -> str:
    return ("/** Parameter ranges of ldpcore (generated by sdks/vectors/generate.py from "
            "ldpcore: do not edit). */\n"
            "/* eslint-disable */\n"
            "export const LIMITS = {\n"
            + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in doc.items())
            + "\n} as const;\n")


def _java_limits(doc: dict[str, Any]) -> str:
    text = json.dumps(doc, separators=(",", ":"))
    chunks = [text[i:i + 90] for i in range(0, len(text), 90)]
    body = "\n      + ".join(json.dumps(c) for c in chunks)
    return ("package org.ldpstream.sdk;\n\n"
            "/** Parameter ranges of ldpcore (generated by sdks/vectors/generate.py: do not "
            "edit). */\n"
            "final class LimitsData {\n"
            "  private LimitsData() {}\n\n"
            f"  static final String JSON = {body};\n"
            "}\n")


def generate() -> dict[str, str]:
    """Path (relative to sdks/vectors) → text of every generated file."""
    by_mech: dict[str, list[dict[str, Any]]] = {}
    for i, (name, decl, inputs) in enumerate(CASES):
        case = _case(name, decl, inputs, seed=1000 + i)
        mech = "two-level" if "epsilon_1" in decl else decl["oracle"]["mechanism"]
        by_mech.setdefault(mech, []).append(case)
    files = {}
    for mech, cases in by_mech.items():
        doc = {"format": FORMAT, "version": VERSION, "mechanism": mech, "cases": cases}
        files[f"{mech}.json"] = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    doc = {"format": FORMAT, "version": VERSION, "mechanism": "permanent",
           "derivation": "docs/wire-format.md, Permanent answers", "cases": permanent_cases()}
    files["permanent/permanent.json"] = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    lim = limits()
    files["limits/limits.json"] = json.dumps(lim, indent=1) + "\n"
    files["../js/src/limits.ts"] = _js_limits(lim)
    files["../java/src/main/java/org/ldpstream/sdk/LimitsData.java"] = _java_limits(lim)
    return files


def main(argv: list[str]) -> int:
    files = {HERE / n: text for n, text in generate().items()}
    code = write_or_check(files, check="--check" in argv, command=f"python {__file__}")
    if "--check" not in argv:
        print(f"wrote {len(files)} files to {HERE}")
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
