"""The message codec's contract: any input raises only ReportError, with the right reason."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ldpcore import ReportError, Reports, wire
from ldpcore.collection import CollectionSpec, encode_message, message_prefix
from ldpcore.errors import REPORT_REASONS
from ldpcore.message import (
    MAX_JSON_BYTES,
    FrameError,
    MessageDecoder,
    MessageLayout,
    decode_message,
    frame,
    json_depth,
    load_json,
    message_report_count,
    peek_message,
    split_frames,
    token_frame,
)
from tests.message_cases import mutate, specs, valid_message

SPECS = specs()
BY_ID = {s.id: s for s in SPECS}
DECODERS = {s.id: MessageDecoder(s) for s in SPECS}
GRR = BY_ID["f-grr"]
SS = BY_ID["f-ss"]


def _clean(exc: ReportError) -> None:
    """The decoders' own checks caught it, not the last-resort catch-all."""
    assert exc.reason in REPORT_REASONS
    assert not str(exc).startswith("undecodable message"), exc


def _reason(spec: CollectionSpec, data: Any) -> str:
    with pytest.raises(ReportError) as info:
        decode_message(spec, DECODERS[spec.id].oracle, data)
    _clean(info.value)
    return info.value.reason


def _json(spec: CollectionSpec, reports: list[Any], **top: Any) -> bytes:
    return json.dumps({"collection": spec.id, "fingerprint": spec.fingerprint,
                       "reports": reports, **top}).encode()


def _record(spec: CollectionSpec, **cols: Any) -> dict[str, Any]:
    o = DECODERS[spec.id].oracle
    return {"mechanism": o.mechanism, "fingerprint": o.fingerprint, **cols}


GOOD = valid_message(GRR, np.random.default_rng(1), "binary", n=5)
ENV = message_prefix(GRR)


def _binary_with(**changes: Any) -> bytes:
    """GRR's message with the wire batch rebuilt from modified parts."""
    o = DECODERS[GRR.id].oracle
    y = changes.get("y", np.array([1, 2, 3], dtype=np.uint16))
    mech = changes.get("mechanism", o.mechanism)
    fp = changes.get("fingerprint", o.fingerprint)
    return ENV + wire.encode(Reports(mech, fp, {"y": y}))


# One case per reason label of ldpcore's decoders (the worker adds key_mismatch,
# unknown_collection, internal and oversize: tests/aggregator and tests/integration).
REASON_CASES: list[tuple[str, CollectionSpec, bytes]] = [
    ("garbage", GRR, b"\x00\x01 not a message"),
    ("garbage", GRR, b'{"collection": "f-grr", '),
    ("garbage", GRR, b"LDPM\x01\x05\xff\xfe\xfd\xfc\xfb" + b"0" * 16),
    ("version", GRR, b"LDPM\x02" + GOOD[5:]),
    ("version", GRR, ENV + b"LDPR\x09" + GOOD[len(ENV) + 5:]),
    ("truncated", GRR, GOOD[:-1]),
    ("truncated", GRR, GOOD[:3 + len(ENV)]),
    ("truncated", GRR, GOOD[:8]),
    ("truncated", GRR, GOOD + b"\x00"),
    ("too_large", GRR, b"{\"collection\": " + b"[" * 5 + b"]" * 5 + b"}"),
    ("too_large", GRR, b"{" + b"[" * 100_000),
    ("schema", GRR, json.dumps({"collection": "f-grr", "fingerprint": GRR.fingerprint}).encode()),
    ("schema", GRR, json.dumps({"fingerprint": GRR.fingerprint, "reports": []}).encode()),
    ("schema", GRR, json.dumps({"collection": 7, "fingerprint": GRR.fingerprint,
                                "reports": []}).encode()),
    ("schema", GRR, _json(GRR, [], extra=1)),
    ("schema", GRR, _json(GRR, {"y": 1})),  # type: ignore[arg-type]
    ("schema", GRR, _json(GRR, [_record(GRR)])),
    ("schema", GRR, _json(GRR, [{**_record(GRR, y=1), "z": 2}])),
    ("schema", GRR, _json(GRR, [_record(GRR, y="1")])),
    ("schema", GRR, _json(GRR, [_record(GRR, y=True)])),
    ("schema", GRR, _json(GRR, [[1]])),
    ("schema", GRR, _json(GRR, [{**_record(GRR, y=1), "mechanism": ["grr"]}])),
    ("schema", BY_ID["f-oue"], _json(BY_ID["f-oue"], [_record(BY_ID["f-oue"], bits=3)])),
    ("shape", GRR, ENV + wire.encode(Reports("grr", DECODERS[GRR.id].oracle.fingerprint,
                                             {"y": np.array([1], dtype=np.uint32)}))),
    ("shape", GRR, ENV + wire.encode(Reports("grr", DECODERS[GRR.id].oracle.fingerprint,
                                             {"z": np.array([1], dtype=np.uint16)}))),
    ("wrong_collection", GRR, valid_message(BY_ID["f-oue"], np.random.default_rng(2), "binary")),
    ("wrong_collection", GRR, valid_message(BY_ID["f-oue"], np.random.default_rng(2), "json")),
    ("fingerprint", GRR, ENV[:-16] + b"0" * 16 + GOOD[len(ENV):]),
    ("fingerprint", GRR, _binary_with(fingerprint="0123456789abcdef")),
    ("fingerprint", GRR, _json(GRR, [{**_record(GRR, y=1), "fingerprint": "x"}])),
    ("mechanism", GRR, _binary_with(mechanism="oue")),
    ("mechanism", GRR, _json(GRR, [{**_record(GRR, y=1), "mechanism": "oue"}])),
    ("out_of_range", GRR, _binary_with(y=np.array([1, 16], dtype=np.uint16))),
    ("out_of_range", GRR, _json(GRR, [_record(GRR, y=16)])),
    ("out_of_range", GRR, _json(GRR, [_record(GRR, y=-1)])),
    ("out_of_range", BY_ID["f-oue"], _json(BY_ID["f-oue"], [_record(BY_ID["f-oue"],
                                                                    bits=[1, 99])])),
    ("out_of_range", BY_ID["f-oue"], _json(BY_ID["f-oue"], [_record(BY_ID["f-oue"],
                                                                    bits=[1, 1])])),
    ("invalid", SS, _json(SS, [_record(SS, bits=[])])),
]


@pytest.mark.parametrize("reason,spec,data", REASON_CASES,
                         ids=[f"{r}-{i}" for i, (r, _, _) in enumerate(REASON_CASES)])
def test_each_malformation_gets_its_reason(reason: str, spec: CollectionSpec, data: bytes) -> None:
    assert _reason(spec, data) == reason


def test_every_decoder_reason_label_has_a_case() -> None:
    assert {r for r, _, _ in REASON_CASES} == set(REPORT_REASONS)


def test_non_bytes_input_is_garbage() -> None:
    for junk in (None, 1, "LDPM", [b"x"]):
        assert _reason(GRR, junk) == "garbage"
        with pytest.raises(ReportError):
            peek_message(junk)  # type: ignore[arg-type]


def test_json_larger_than_the_bound_is_too_large() -> None:
    data = _json(GRR, [_record(GRR, y=1)]).rstrip(b"}") + b" " * MAX_JSON_BYTES + b"}"
    assert _reason(GRR, data) == "too_large"


def test_the_report_error_reason_survives_pickling() -> None:
    import pickle

    err = pickle.loads(pickle.dumps(ReportError("x", reason="schema")))
    assert err.reason == "schema" and str(err) == "x"
    with pytest.raises(ValueError, match="reason must be one of"):
        ReportError("x", reason="nonsense")


@pytest.mark.parametrize("spec", SPECS, ids=[s.id for s in SPECS])
@pytest.mark.parametrize("fmt", ["binary", "json"])
def test_valid_messages_round_trip(spec: CollectionSpec, fmt: str) -> None:
    rng = np.random.default_rng(3)
    o = DECODERS[spec.id].oracle
    reports = o.perturb(rng.integers(0, spec.domain.size, 7), rng=rng)
    cid, got = decode_message(spec, o, encode_message(spec, reports, fmt))
    assert cid == spec.id and got == reports
    assert DECODERS[spec.id].aggregate(encode_message(spec, reports, fmt)) == o.aggregate(reports)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=200), sid=st.sampled_from([s.id for s in SPECS]))
def test_raw_bytes_raise_only_report_error(data: bytes, sid: str) -> None:
    for payload in (data, b"LDPM\x01" + data, message_prefix(BY_ID[sid]) + data,
                    message_prefix(BY_ID[sid]) + b"LDPR\x01" + data):
        try:
            decode_message(BY_ID[sid], DECODERS[sid].oracle, payload)
        except ReportError as exc:
            _clean(exc)
        try:
            peek_message(payload)
        except ReportError as exc:
            _clean(exc)
        assert message_report_count(payload) >= 1


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), sid=st.sampled_from([s.id for s in SPECS]),
       fmt=st.sampled_from(["binary", "json"]))
def test_mutated_messages_raise_only_report_error(seed: int, sid: str, fmt: str) -> None:
    rng = np.random.default_rng(seed)
    spec = BY_ID[sid]
    other = valid_message(SPECS[int(rng.integers(0, len(SPECS)))], rng, fmt)
    value = mutate(valid_message(spec, rng, fmt), rng, other)
    try:
        state = DECODERS[sid].aggregate(value)
    except ReportError as exc:
        _clean(exc)
    else:  # still valid: it must really be a batch of this collection
        assert state.fingerprint == DECODERS[sid].oracle.fingerprint


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=4),
    max_leaves=12)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sid=st.sampled_from([s.id for s in SPECS]), junk=json_values,
       where=st.sampled_from(["reports", "record", "column", "top"]))
def test_structured_json_junk_raises_only_report_error(sid: str, junk: Any, where: str) -> None:
    spec = BY_ID[sid]
    rec = json.loads(valid_message(spec, np.random.default_rng(0), "json", n=1))["reports"][0]
    if where == "reports":
        body = _json(spec, junk)
    elif where == "record":
        body = _json(spec, [rec, junk])
    elif where == "column":
        col = sorted(set(rec) - {"mechanism", "fingerprint"})[0]
        body = _json(spec, [{**rec, col: junk}])
    else:
        body = json.dumps({"collection": spec.id, "fingerprint": junk,
                           "reports": [rec]}, allow_nan=True).encode()
    try:
        DECODERS[sid].aggregate(body)
    except ReportError as exc:
        _clean(exc)


@pytest.mark.parametrize("spec", SPECS, ids=[s.id for s in SPECS])
def test_batch_decoder_counts_the_good_and_names_the_bad(spec: CollectionSpec) -> None:
    rng = np.random.default_rng(11)
    dec = DECODERS[spec.id]
    good = [valid_message(spec, rng, "binary") for _ in range(6)]
    fast, bad = dec.aggregate_many(good)
    assert not bad
    assert fast == sum((dec.aggregate(v) for v in good[1:]), dec.aggregate(good[0]))
    mixed = good[:3] + [good[3][:-2], None, valid_message(spec, rng, "json"), good[4]]
    state, bad = dec.aggregate_many(mixed)
    assert [i for i, _ in bad] == [3, 4]
    assert [e.reason for _, e in bad] == ["truncated", "garbage"]
    expect = dec.aggregate(mixed[0])
    for i in (1, 2, 5, 6):
        expect += dec.aggregate(mixed[i])
    assert state == expect


@pytest.mark.parametrize("spec", SPECS, ids=[s.id for s in SPECS])
def test_batch_decoder_of_equal_length_messages_matches_one_by_one(spec: CollectionSpec) -> None:
    """The one-length fast path (single-report messages) agrees with decoding each alone."""
    rng = np.random.default_rng(12)
    dec = DECODERS[spec.id]
    good = [valid_message(spec, rng, "binary", n=1) for _ in range(40)]
    state, bad = dec.aggregate_many(good)
    assert not bad
    assert state == sum((dec.aggregate(v) for v in good[1:]), dec.aggregate(good[0]))
    # A flipped byte anywhere: the same length, so only the byte check can catch it.
    for pos in sorted({0, 4, 5, len(good[0]) // 2, len(good[0]) - 1}):
        batch = list(good)
        batch[17] = batch[17][:pos] + bytes([batch[17][pos] ^ 0xFF]) + batch[17][pos + 1:]
        try:
            alone = dec.aggregate(batch[17])
        except ReportError:
            alone = None
        state, bad = dec.aggregate_many(batch)
        assert [i for i, _ in bad] == ([] if alone is not None else [17])
        expect = sum((dec.aggregate(v) for i, v in enumerate(batch) if i not in (0, 17)),
                     dec.aggregate(batch[0]))
        assert state == (expect if alone is None else expect + alone)


def test_a_batch_of_another_oracle_names_the_oracles_fingerprint_not_the_collections() -> None:
    data = _binary_with(fingerprint="0123456789abcdef")
    with pytest.raises(ReportError, match="oracle's") as info:
        DECODERS[GRR.id].decode(data)
    assert DECODERS[GRR.id].oracle.fingerprint in str(info.value)
    assert GRR.fingerprint not in str(info.value)  # the envelope's, which did match


@pytest.mark.parametrize("spec", SPECS, ids=[s.id for s in SPECS])
def test_the_layout_knows_canonical_messages_by_their_bytes(spec: CollectionSpec) -> None:
    rng = np.random.default_rng(13)
    lay = MessageLayout(spec, DECODERS[spec.id].oracle)
    msgs = [valid_message(spec, rng, "binary", n=n) for n in (1, 3, 1, 2)]
    assert [lay.framed_count(m) for m in msgs] == [1, 3, 1, 2]
    for bad in (msgs[1][:-1], msgs[1] + b"\0", b"", message_prefix(spec),
                valid_message(spec, rng, "json")):
        assert lay.framed_count(bad) == -1
    # rows of one report count (from a column on): their columns, to rebuild one message
    rows = np.frombuffer(b"".join(b"hd" + m for m in msgs[::2]), np.uint8).reshape(2, -1)
    n, blocks = lay.uniform_columns(rows, 2) or (-1, [])
    merged = lay.encode(2 * n, [b.tobytes() for b in blocks])
    assert lay.framed_count(merged) == 2
    assert DECODERS[spec.id].decode(merged) == Reports.concat(
        [DECODERS[spec.id].decode(m) for m in msgs[::2]])
    assert lay.uniform_columns(rows, 1) is None and lay.uniform_columns(rows[:, :-1], 2) is None


def test_frames_split_back_and_a_cut_frame_is_named() -> None:
    msgs = [GOOD, b"", b"x" * 300]
    body = frame(msgs)
    assert split_frames(body) == msgs and split_frames(b"") == []
    for cut, index in ((len(body) - 1, 2), (4 + len(GOOD) + 2, 1), (4 + len(GOOD) + 6, 2)):
        with pytest.raises(FrameError) as info:
            split_frames(body[:cut])
        assert (info.value.reason, info.value.index) == ("truncated", index)
    tok = token_frame([([b"t" * 3, b"u" * 3], GOOD)])
    assert tok == b"\x02\x00" + b"ttt" + b"uuu" + len(GOOD).to_bytes(4, "little") + GOOD


def test_json_is_bounded_before_it_is_parsed() -> None:
    assert json_depth(b'{"a": "[[[["}') == 5  # brackets in strings count: none in a message
    assert load_json(b"[[[[1]]]]", max_depth=4) == [[[[1]]]]
    for data, reason in ((b"[" * 5 + b"]" * 5, "too_large"), (b"[1,", "garbage"),
                         (b"\xff", "garbage")):
        with pytest.raises(ReportError) as info:
            load_json(data, max_depth=4)
        assert info.value.reason == reason
    with pytest.raises(ReportError, match="exceeds 3"):
        load_json(b"[1, 2]", max_bytes=3)
    assert load_json(b" " * (MAX_JSON_BYTES + 1) + b"1", max_bytes=None) == 1
