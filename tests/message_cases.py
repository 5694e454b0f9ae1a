"""Messages of every mechanism, their mutations, and the reference outcome of each.

Shared by the property tests of the decoders (tests/ldpcore/test_message.py) and
the end-to-end fuzz run through a real worker (tests/integration/test_fuzz_worker.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcore import ReportError, State
from ldpcore.collection import CollectionSpec, encode_message
from ldpcore.message import MessageDecoder, peek_message

__all__ = ["SPEC_DICTS", "specs", "valid_message", "mutate", "Outcome", "reference_outcome"]

_SMALL = {"kind": "integers", "low": 0, "high": 15}
_NUM = {"kind": "interval", "low": 0.0, "high": 10.0, "bins": 16}

SPEC_DICTS: list[dict[str, Any]] = [
    {"id": f"f-{m}", "oracle": {"mechanism": m, "epsilon": 1.5}, "domain": _SMALL}
    for m in ("grr", "sue", "oue", "blh", "olh", "hr", "hrr", "ss", "cms", "hcms", "hh", "haar")
] + [
    {"id": "f-cat", "oracle": {"mechanism": "grr", "epsilon": 1.0},
     "domain": {"kind": "categories", "labels": ["a", "b", "c"]}},
    {"id": "f-olh-big", "oracle": {"mechanism": "olh", "epsilon": 3.0},
     "domain": {"kind": "integers", "low": 0, "high": 999}},
    {"id": "f-sw", "oracle": {"mechanism": "sw", "epsilon": 1.0}, "domain": _NUM},
    {"id": "f-pm", "oracle": {"mechanism": "pm", "epsilon": 1.0}, "domain": _NUM},
    {"id": "f-duchi", "oracle": {"mechanism": "duchi", "epsilon": 1.0}, "domain": _NUM},
    {"id": "f-pem", "oracle": {"mechanism": "pem", "epsilon": 4.0, "keep": 8, "eta": 4,
                               "pool": 16},
     "domain": {"kind": "integers", "low": 0, "high": 2**16 - 1}},
    # Several attributes per report (ldpcore.multi): a mask column plus each
    # attribute's columns, zero where not sampled.
    {"id": "f-multi", "oracle": {"mechanism": "multi", "epsilon": 2.0, "sample": 2,
                                 "attributes": {"size": "oue", "age": "duchi"}},
     "domain": {"kind": "attributes", "attributes": [
         {"name": "os", "kind": "categories", "labels": ["a", "b", "c"]},
         {"name": "size", "kind": "integers", "low": 0, "high": 9},
         {"name": "age", **_NUM}]}},
    # Set-valued (padding and sampling): amplified GRR, OLH, candidates, itemsets, sizes.
    {"id": "f-ps", "oracle": {"mechanism": "ps", "epsilon": 1.0, "length": 3}, "domain": _SMALL},
    {"id": "f-ps-olh", "oracle": {"mechanism": "ps", "epsilon": 1.0, "length": 2,
                                  "inner": "olh", "candidates": [3, 1, 7]}, "domain": _SMALL},
    {"id": "f-psi", "oracle": {"mechanism": "psi", "epsilon": 1.0, "length": 2,
                               "itemsets": [[0, 1], [2], [3, 4, 5]]}, "domain": _SMALL},
    {"id": "f-setsize", "oracle": {"mechanism": "setsize", "epsilon": 1.0,
                                   "candidates": [0, 2, 4, 6]}, "domain": _SMALL},
]


def specs() -> list[CollectionSpec]:
    """One collection per mechanism (plus a categorical and a larger OLH one)."""
    return [CollectionSpec.from_dict(d) for d in SPEC_DICTS]


def valid_message(spec: CollectionSpec, rng: np.random.Generator, fmt: str,
                  n: int | None = None) -> bytes:
    """A well-formed message of ``spec`` with ``n`` (default 1..8) reports."""
    o = spec.oracle()
    k = int(rng.integers(1, 9)) if n is None else n
    values = rng.integers(0, spec.domain.size, k)
    if spec.set_valued:  # devices hold sets: 0..3 items each
        sets = [rng.choice(spec.domain.size, size=int(rng.integers(0, 4)), replace=False)
                for _ in range(k)]
        return encode_message(spec, o.perturb_sets([s.tolist() for s in sets], rng=rng), fmt)
    return encode_message(spec, o.perturb(values, rng=rng), fmt)


def _mutate_json(value: bytes, rng: np.random.Generator, other: bytes) -> bytes:
    obj = json.loads(value)
    choice = int(rng.integers(0, 10))
    junk: list[Any] = [None, True, 1.5, -1, 2**70, "x", [], {}, [[1]], {"a": [1]}]
    pick = junk[int(rng.integers(0, len(junk)))]
    recs = obj["reports"]
    if choice == 0:
        obj.pop(["collection", "fingerprint", "reports"][int(rng.integers(0, 3))])
    elif choice == 1:
        obj[["collection", "fingerprint", "reports"][int(rng.integers(0, 3))]] = pick
    elif choice == 2:
        obj["extra"] = pick
    elif choice == 3 and recs:
        rec = recs[int(rng.integers(0, len(recs)))]
        rec.pop(list(rec)[int(rng.integers(0, len(rec)))])
    elif choice == 4 and recs:
        rec = recs[int(rng.integers(0, len(recs)))]
        rec[list(rec)[int(rng.integers(0, len(rec)))]] = pick
    elif choice == 5 and recs:
        recs[int(rng.integers(0, len(recs)))]["extra"] = 1
    elif choice == 6 and recs:
        recs[int(rng.integers(0, len(recs)))] = pick
    elif choice == 7:
        depth = int(rng.integers(5, 3000))
        return b"[" * depth + b"]" * depth
    elif choice == 8:
        return json.dumps({"collection": obj.get("collection"),
                           "fingerprint": obj.get("fingerprint")}).encode()
    else:
        obj["reports"] = json.loads(other)["reports"] if other[:1] == b"{" else []
    return json.dumps(obj).encode()


def mutate(value: bytes, rng: np.random.Generator, other: bytes) -> bytes:
    """A mutation of ``value``: bit flips, truncation, garbage, splices, JSON field edits.

    ``other`` is a valid message of another collection (for swapped envelopes/bodies).
    Some mutations leave the message valid (e.g. a flipped bit inside a report that
    stays in range): the reference outcome decides, not the mutation.
    """
    kind = int(rng.integers(0, 9))
    if value[:1] == b"{" and kind < 3:
        return _mutate_json(value, rng, other)
    b = bytearray(value)
    if kind in (0, 3) and b:
        for _ in range(int(rng.integers(1, 4))):
            i = int(rng.integers(0, len(b)))
            b[i] ^= 1 << int(rng.integers(0, 8))
        return bytes(b)
    if kind == 1:
        return bytes(b[:int(rng.integers(0, max(len(b), 1)))])
    if kind == 2:
        return bytes(rng.integers(0, 256, int(rng.integers(0, 64)), dtype=np.uint8))
    if kind == 4:
        return bytes(b) + bytes(rng.integers(0, 256, int(rng.integers(1, 9)), dtype=np.uint8))
    if kind == 5:  # another collection's envelope on this body, or vice versa
        cut = int(rng.integers(0, min(len(b), len(other)) + 1))
        return bytes(other[:cut]) + bytes(b[cut:])
    if kind == 6 and b:
        i = int(rng.integers(0, len(b)))
        return bytes(b[:i]) + bytes([int(rng.integers(0, 256))]) + bytes(b[i:])
    if kind == 7:
        return b""
    return bytes(other)  # a valid message of another collection under this key


@dataclass(frozen=True)
class Outcome:
    """What a worker must do with one message: count ``state`` or reject with ``reason``."""

    reason: str | None
    state: State | None = None


def reference_outcome(by_id: dict[str, CollectionSpec], key: bytes | None,
                      value: bytes) -> Outcome:
    """The worker's contract, restated: key → collection, envelope, then full decoding."""
    if key is not None:
        try:
            cid = key.decode("ascii")
        except UnicodeDecodeError:
            cid = "?"
    else:
        try:
            cid = peek_message(value)[0]
        except ReportError:
            cid = "?"
    try:
        mid, _ = peek_message(value)
    except ReportError as exc:
        return Outcome(exc.reason)
    if key is not None and mid != cid:
        return Outcome("key_mismatch")
    spec = by_id.get(cid)
    if spec is None:
        return Outcome("unknown_collection")
    try:
        return Outcome(None, MessageDecoder(spec).aggregate(value))
    except ReportError as exc:
        return Outcome(exc.reason)
