"""The committed SDK test vectors are what ldpcore generates, and ldpcore passes them.

``sdks/vectors/generate.py`` regenerates every file from ldpcore; a change to a
mechanism, the reference draw order or the message format that is not regenerated
fails here.  Each case is then checked the other way round: the collection's fingerprint
is the SHA-256 prefix of its canonical text, the messages decode back into the expected
reports, and replaying the words reproduces them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from ldpcore import wire
from ldpcore.collection import CollectionSpec
from ldpcore.errors import ParameterError
from ldpcore.message import MessageDecoder, decode_message, encode_message
from ldpcore.reference import (
    PermanentWords,
    WordStream,
    perturb_reference,
    rerandomize_reference,
)

VECTORS = Path(__file__).resolve().parents[2] / "sdks" / "vectors"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("sdk_vectors_generate", VECTORS / "generate.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cases() -> list[dict[str, Any]]:
    out = []
    for path in sorted(VECTORS.glob("*.json")):
        out.extend(json.loads(path.read_text())["cases"])
    return out


def test_committed_vectors_are_what_ldpcore_generates() -> None:
    files = _generator().generate()
    # (a folder with its own generate.py, e.g. privacypass/, is generated and checked there)
    on_disk = {str(p.relative_to(VECTORS)) for p in VECTORS.rglob("*.json")
               if p.parent == VECTORS or not (p.parent / "generate.py").exists()}
    assert on_disk == {n for n in files if not n.startswith("..")}
    for name, text in files.items():  # the vectors, and the limits in the SDKs' sources
        assert (VECTORS / name).read_text() == text, f"{name} is stale: run generate.py"


def _permanent_cases() -> list[dict[str, Any]]:
    return list(json.loads((VECTORS / "permanent" / "permanent.json").read_text())["cases"])


@pytest.mark.parametrize("case", _permanent_cases(), ids=lambda c: c["name"])
def test_python_devices_derive_the_permanent_answers_of_the_vector(case: dict[str, Any]
                                                                   ) -> None:
    from producer.sdk import Device
    from producer.store import MemoryStore

    spec = CollectionSpec.from_dict(case["collection"])
    secret = bytes.fromhex(case["secret"])
    words = PermanentWords(secret, spec.fingerprint, int(case["keys"][0]))
    assert [words.next_u32() for _ in case["words"]] == case["words"]
    dev = Device(spec, store=MemoryStore(), secret=secret)
    got = [r for x in case["inputs"] for r in wire.to_records(dev.permanent(x))]
    assert got == case["permanent"]
    reports = wire.from_records(spec.oracle(), got)
    assert encode_message(spec, reports).hex() == case["message_binary"]
    assert encode_message(spec, reports, "json").decode() == case["message_json"]


def test_every_memoizing_case_has_a_permanent_vector() -> None:
    names = {c["name"] for c in _permanent_cases()}
    want = {c["name"] for c in _cases() if c["collection"].get("memoization") != "none"}
    assert names == want and len(names) >= 40
    secrets = {len(c["secret"]) // 2 for c in _permanent_cases()}
    assert secrets == {16, 32, 64}


def test_vectors_cover_every_mechanism_a_collection_can_declare() -> None:
    from ldpcore.longitudinal import TWO_LEVEL_MECHANISMS
    from ldpcore.registry import MECHANISMS

    declared = {c["collection"]["oracle"]["mechanism"] for c in _cases()}
    # "adaptive" resolves to a concrete mechanism in the served spec; "vector" is refused
    # by collections (they declare "multi" with pm / duchi interval attributes instead).
    assert declared == set(MECHANISMS) - {"adaptive", "vector"}
    with pytest.raises(ParameterError, match="vector"):
        CollectionSpec.from_dict({"id": "v", "oracle": {"mechanism": "vector", "epsilon": 1.0,
                                                        "dimensions": 2},
                                  "domain": {"kind": "integers", "low": 0, "high": 3}})
    # every attribute kind of a multi collection, and each kind of set-valued entries
    multi = [c for c in _cases() if c["collection"]["oracle"]["mechanism"] == "multi"]
    assert {a["kind"] for c in multi for a in c["collection"]["domain"]["attributes"]} == {
        "categories", "integers", "interval"}
    assert any(c["collection"]["oracle"].get("pairs") for c in multi)
    assert {c["collection"]["protocol"]["name"] for c in _cases()
            if "protocol" in c["collection"]} == {"svim", "svsm", "ldpminer"}
    two_level = {c["collection"]["oracle"]["mechanism"] for c in _cases()
                 if c["collection"].get("memoization") == "two-level"}
    assert two_level == set(TWO_LEVEL_MECHANISMS)


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["name"])
def test_python_passes_the_vector(case: dict[str, Any]) -> None:
    raw = case["collection"]
    spec = CollectionSpec.from_dict(raw)  # verifies the served fingerprint
    assert spec.fingerprint == case["fingerprint"] == raw["fingerprint"]
    assert hashlib.sha256(case["canonical"].encode()).hexdigest()[:16] == case["fingerprint"]
    assert (hashlib.sha256(case["oracle_canonical"].encode()).hexdigest()[:16]
            == case["oracle_fingerprint"] == spec.oracle().fingerprint)
    if spec.set_valued:
        assert spec.index_sets(case["inputs"]).to_lists() == case["values"]
    elif spec.domain.kind == "attributes":
        assert spec.domain.attribute_indices(case["inputs"]).tolist() == case["values"]
    else:
        assert spec.domain.index(case["inputs"]).tolist() == case["values"]
    oracle = spec.oracle()
    src = WordStream(case["words"])
    reports = perturb_reference(oracle, case["values"], src)
    tl = spec.two_level()
    if tl is not None:
        assert wire.to_records(reports) == case["permanent"]
        reports = rerandomize_reference(tl, reports, src)
    assert src.used == len(case["words"])
    assert wire.to_records(reports) == case["reports"]
    for data in (bytes.fromhex(case["message_binary"]), case["message_json"].encode()):
        cid, decoded = decode_message(spec, oracle, data)
        assert cid == spec.id and wire.to_records(decoded) == case["reports"]
    # the binary message is in the canonical layout: the batch path of the gateway and the
    # workers (one vectorised check of many messages) reads it as the reports too
    dec, binary = MessageDecoder(spec, oracle), bytes.fromhex(case["message_binary"])
    assert dec.layout.framed_count(binary) == len(case["reports"])
    many, bad = dec.decode_many([binary] * 8)
    assert not bad and wire.to_records(many) == case["reports"] * 8


@pytest.mark.parametrize("case", [c for c in _cases() if "phases" in c], ids=lambda c: c["name"])
def test_python_device_takes_part_in_the_phase_of_the_vector(case: dict[str, Any]) -> None:
    from producer.sdk import Device
    from producer.store import MemoryStore

    spec = CollectionSpec.from_dict(case["collection"])
    seen = set()
    for row in case["phases"]:
        dev = Device(spec, store=MemoryStore(), secret=bytes.fromhex(row["secret"]))
        assert dev.takes_part() is row["takes_part"]
        assert (dev.message(case["inputs"][0], now=0.0) is not None) is row["takes_part"]
        seen.add(row["takes_part"])
    assert seen == ({True} if spec.protocol and spec.protocol.get("fractions") is None
                    else {True, False})
