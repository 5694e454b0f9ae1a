"""gateway.parse, by hypothesis fuzz of the body parser and the batch validation: for any
body (raw bytes, frames of mutated messages, JSON arrays of mutated messages) the outcome
is messages or a 4xx, never another exception; and whatever the gateway accepts, the
aggregator's decoder accepts too (the same reports), so nothing the gateway lets through
is dead-lettered."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gateway.batcher import Request, kafka_records, validate_requests
from gateway.parse import (
    FRAMES,
    JSON,
    OCTETS,
    TOKEN_FRAMES,
    BodyError,
    Catalogue,
    UnknownCollection,
    frame,
    parse_body,
    token_frame,
)
from ldpcore import Reports
from ldpcore.errors import ReportError
from ldpcore.message import MessageDecoder
from tests.message_cases import mutate, specs, valid_message

SPECS = specs()
CAT = Catalogue(SPECS[:-2])  # the last two stay unknown to the gateway
DECODERS = {s.id: MessageDecoder(s) for s in SPECS}


def _message(seed: int, fmt: str) -> bytes:
    rng = np.random.default_rng(seed)
    spec = SPECS[int(rng.integers(0, len(SPECS)))]
    value = valid_message(spec, rng, fmt)
    if rng.random() < 0.5:
        other = valid_message(SPECS[int(rng.integers(0, len(SPECS)))], rng, fmt)
        value = mutate(value, rng, other)
    return value


def _uniform(seed: int, k: int, flip: int | None) -> bytes:
    """k frames of one collection, one length (the vectorised path), one of them (``flip``)
    with a bit flipped (still the same length: it may or may not stay valid)."""
    rng = np.random.default_rng(seed)
    spec = SPECS[int(rng.integers(0, len(SPECS) - 2))]
    n = int(rng.integers(1, 4))
    msgs = [valid_message(spec, rng, "binary", n) for _ in range(k)]
    if flip is not None:
        b = bytearray(msgs[flip % k])
        at = int(rng.integers(0, len(b)))
        b[at] ^= 1 << int(rng.integers(0, 8))
        msgs[flip % k] = bytes(b)
    return frame(msgs)


bodies = st.one_of(
    st.tuples(st.just(FRAMES), st.builds(_uniform, st.integers(0, 2**32), st.integers(8, 40),
                                         st.none() | st.integers(0, 39))),
    st.tuples(st.sampled_from([OCTETS, FRAMES, JSON, None, "text/plain"]), st.binary(
        max_size=300)),
    st.tuples(st.just(OCTETS), st.integers(0, 2**32).map(lambda s: _message(s, "binary"))),
    st.tuples(st.just(FRAMES), st.lists(st.integers(0, 2**32), min_size=1, max_size=6).map(
        lambda seeds: frame(_message(s, "binary") for s in seeds))),
    st.tuples(st.just(FRAMES), st.tuples(st.lists(st.integers(0, 2**32), max_size=4),
                                         st.binary(max_size=12)).map(
        lambda t: frame(_message(s, "binary") for s in t[0]) + t[1])),
    st.tuples(st.just(JSON), st.integers(0, 2**32).map(lambda s: _message(s, "json"))),
    # Privacy Pass token frames: garbage, and messages with (possibly cut) token bytes
    st.tuples(st.just(TOKEN_FRAMES), st.binary(max_size=800)),
    st.tuples(st.just(TOKEN_FRAMES), st.tuples(
        st.lists(st.tuples(st.integers(0, 2**32), st.integers(0, 2),
                           st.binary(min_size=354, max_size=354)), min_size=1, max_size=4),
        st.integers(0, 40)).map(lambda t: token_frame(
            ([tok] * k, _message(s, "binary")) for s, k, tok in t[0])[:-t[1] or None])),
    st.tuples(st.just(JSON), st.lists(st.integers(0, 2**32), min_size=1, max_size=5).map(
        lambda seeds: b"[" + b",".join(_message(s, "json") for s in seeds) + b"]")),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies)
def test_any_body_parses_to_messages_or_a_4xx_and_accepted_ones_decode_alike(
        case: tuple[str | None, bytes]) -> None:
    ctype, body = case
    try:
        messages = parse_body(ctype, body, CAT)
    except BodyError as exc:
        event(f"refused {exc.status} {exc.reason}")
        assert exc.status in (400, 415)
        assert exc.reason and exc.detail
        return
    except UnknownCollection as exc:
        event("unknown collection")
        assert exc.collection not in CAT
        return
    assert messages
    req = Request(lambda result: None, messages, len(body))
    batches = validate_requests([req])
    if len(messages) == 1 and messages[0].messages > 1:
        event("merged frames")
    if req.error is not None:
        event(f"refused in the batch: {req.error.reason}")
        assert req.error.status == 400 and req.error.index is not None
        assert 0 <= req.error.index < sum(m.messages for m in messages)
        assert batches == []
        return
    event("accepted")
    # Accepted: each message decodes with the aggregator's decoder to the same reports the
    # gateway will publish, and the Kafka records re-encode exactly those.
    got = {e.cid: r for e, r in batches}
    want: dict[str, list[Reports]] = {}
    for m in messages:
        if m.raw is not None:
            try:
                want.setdefault(m.entry.cid, []).append(DECODERS[m.entry.cid].decode(m.raw))
            except ReportError as exc:  # pragma: no cover - the property under test
                raise AssertionError(f"the gateway accepted what the worker rejects: {exc}")
        else:
            assert m.reports is not None
            want.setdefault(m.entry.cid, []).append(m.reports)
        assert m.n == len(want[m.entry.cid][-1])
    for cid, parts in want.items():
        expected = Reports.concat(parts)
        if len(expected):
            assert got[cid] == expected
    records, sizes = kafka_records(batches, 1 << 20)
    for (key, value), (n, nbytes) in zip(records, sizes, strict=True):
        decoded = DECODERS[key.decode()].decode(value)
        assert (len(decoded), len(value)) == (n, nbytes)


def test_json_bodies_nested_too_deep_are_refused_before_parsing() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    try:
        parse_body(JSON, deep, CAT)
    except BodyError as exc:
        assert (exc.status, exc.reason) == (400, "too_large")
    else:  # pragma: no cover
        raise AssertionError("accepted")
    ok = json.dumps([json.loads(valid_message(SPECS[2], np.random.default_rng(1), "json"))])
    assert len(parse_body(JSON, ok.encode(), CAT)) == 1
