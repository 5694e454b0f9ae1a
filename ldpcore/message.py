"""The Kafka message codec: one collection's report batch per message value.

Two encodings of the same envelope (key of the Kafka message = collection id):

* binary: ``b"LDPM"``, u8 version (= 1), u8 id length + ASCII id, 16 ASCII hex
  digits of the collection fingerprint, then one :mod:`ldpcore.wire` batch;
* JSON (interop): ``{"collection": id, "fingerprint": fp, "reports": [record...]}``
  with records as in :func:`ldpcore.wire.to_records`.

The decoder contract: for *any* input, every function here raises only
:class:`~ldpcore.errors.ReportError`, whose ``reason`` says what is wrong (see
:data:`~ldpcore.errors.REPORT_REASONS`).  JSON is bounded before it is parsed:
at most :data:`MAX_JSON_BYTES` bytes and :data:`MAX_JSON_DEPTH` levels of
brackets, which is exactly what the format needs (message → reports → record
→ bit list), so a deeply nested body cannot exhaust the parser's stack.

:class:`MessageDecoder` decodes many messages of one collection at once: well
framed binary messages are concatenated without copying per report and
validated in one vectorised pass; only if that fails is each message decoded
on its own, to find the bad ones.

>>> from ldpcore.collection import CollectionSpec
>>> spec = CollectionSpec.from_dict({"id": "os", "oracle": {"mechanism": "grr", "epsilon": 1.0},
...                                  "domain": {"kind": "categories", "labels": ["a", "b"]}})
>>> o = spec.oracle()
>>> good = encode_message(spec, o.perturb([0, 1, 1], rng=1))
>>> dec = MessageDecoder(spec)
>>> reports, bad = dec.decode_many([good, b"junk", good])
>>> len(reports), [(i, e.reason) for i, e in bad]
(6, [(1, 'garbage')])
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from typing import Any, NoReturn, Protocol

import numpy as np

import ldpcore.wire as wire

from .base import Mechanism, Reports, State
from .errors import LDPError, ParameterError, ReportError

__all__ = [
    "CollectionLike",
    "MESSAGE_MAGIC",
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "MessageDecoder",
    "decode_message",
    "encode_message",
    "message_prefix",
    "message_report_count",
    "peek_message",
]

MESSAGE_MAGIC = b"LDPM"
MESSAGE_VERSION = 1
MAX_JSON_BYTES = 16 << 20
"""Largest JSON message accepted (the worker fetches at most 16 MiB per partition)."""
MAX_JSON_DEPTH = 4
"""Bracket depth of the JSON format: message object, reports list, record, bit list."""



class CollectionLike(Protocol):
    """What the codec, and the workers through :attr:`MessageDecoder.spec`, read of a
    collection: a :class:`~ldpcore.collection.CollectionSpec` (the codec sits below
    ``ldpcore.collection``, which re-exports it, so it names the shape, not the class)."""

    @property
    def id(self) -> str: ...
    @property
    def fingerprint(self) -> str: ...
    @property
    def window_seconds(self) -> int: ...
    @property
    def retention_seconds(self) -> int: ...
    def oracle(self) -> Mechanism: ...


_JSON_KEYS = {"collection", "fingerprint", "reports"}
# Every byte but the four brackets: bytes.translate(None, _NOT_BRACKETS) keeps only those.
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _envelope(spec: CollectionLike) -> bytes:
    cid = spec.id.encode("ascii")
    return (MESSAGE_MAGIC + struct.pack("<BB", MESSAGE_VERSION, len(cid)) + cid
            + spec.fingerprint.encode("ascii"))


def message_prefix(spec: CollectionLike) -> bytes:
    """The fixed bytes every binary message of ``spec`` starts with (envelope only)."""
    return _envelope(spec)


def encode_message(spec: CollectionLike, reports: Reports, fmt: str = "binary") -> bytes:
    """One Kafka message value carrying ``reports`` of collection ``spec``."""
    if fmt == "binary":
        return _envelope(spec) + wire.encode(reports)
    if fmt == "json":
        return json.dumps({"collection": spec.id, "fingerprint": spec.fingerprint,
                           "reports": wire.to_records(reports)},
                          separators=(",", ":")).encode()
    raise ParameterError(f"fmt must be 'binary' or 'json', got {fmt!r}")


def _as_bytes(data: Any) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ReportError(f"expected bytes, got {type(data).__name__}", reason="garbage")
    return bytes(data)


def _json_depth(data: bytes) -> int:
    """Deepest bracket nesting of ``data``, counting brackets anywhere (C-speed scan).

    Brackets inside strings count too: no valid message has any (ids, fingerprints,
    mechanism and column names are bracket-free), so this never refuses a good one.
    """
    skeleton = data.translate(None, _NOT_BRACKETS)
    if not skeleton:
        return 0
    a = np.frombuffer(skeleton, dtype=np.uint8)
    step = np.where((a == ord("[")) | (a == ord("{")), 1, -1)
    return int(np.cumsum(step).max())


def _load_json(data: bytes) -> dict[str, Any]:
    if len(data) > MAX_JSON_BYTES:
        raise ReportError(f"JSON message of {len(data)} bytes exceeds {MAX_JSON_BYTES}",
                          reason="too_large")
    depth = _json_depth(data)
    if depth > MAX_JSON_DEPTH:
        raise ReportError(f"JSON nested {depth} deep, the format allows {MAX_JSON_DEPTH}",
                          reason="too_large")
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ReportError(f"message is not valid JSON: {exc}", reason="garbage") from None
    if not isinstance(obj, dict):
        raise ReportError(f"JSON message must be an object, got {type(obj).__name__}",
                          reason="schema")
    if not isinstance(obj.get("collection"), str) or not isinstance(obj.get("fingerprint"), str):
        raise ReportError("JSON message needs string 'collection' and 'fingerprint'",
                          reason="schema")
    return obj


def _peek_binary(data: bytes) -> tuple[str, str, int]:
    """(collection id, fingerprint, offset of the wire batch) of a binary message."""
    if len(data) < 6:
        raise ReportError("message truncated in envelope", reason="truncated")
    version, ln = data[4], data[5]
    if version != MESSAGE_VERSION:
        raise ReportError(f"unsupported message version {version} (supported: "
                          f"{MESSAGE_VERSION})", reason="version")
    if len(data) < 22 + ln:
        raise ReportError("message truncated in envelope", reason="truncated")
    try:
        cid = data[6:6 + ln].decode("ascii")
        fp = data[6 + ln:22 + ln].decode("ascii")
    except UnicodeDecodeError as exc:
        raise ReportError(f"message envelope is not ASCII: {exc}", reason="garbage") from None
    return cid, fp, 22 + ln


def peek_message(data: bytes) -> tuple[str, str]:
    """(collection id, collection fingerprint) of a message, without an oracle.

    >>> peek_message(b"nonsense")
    Traceback (most recent call last):
    ...
    ldpcore.errors.ReportError: not a ldpstream message (bad magic)
    """
    data = _as_bytes(data)
    if data[:4] == MESSAGE_MAGIC:
        cid, fp, _ = _peek_binary(data)
        return cid, fp
    if data.lstrip()[:1] == b"{":
        obj = _load_json(data)
        return obj["collection"], obj["fingerprint"]
    _bad_magic(data)


def _bad_magic(data: bytes) -> NoReturn:
    if len(data) < 4 and data and MESSAGE_MAGIC.startswith(data):
        raise ReportError("message truncated in its magic", reason="truncated")
    raise ReportError("not a ldpstream message (bad magic)", reason="garbage")


def _check_envelope(spec: CollectionLike, cid: str, fp: str) -> None:
    if cid != spec.id:
        raise ReportError(f"message is for collection {cid!r}, expected {spec.id!r}",
                          reason="wrong_collection")
    if fp != spec.fingerprint:
        raise ReportError(f"message fingerprint {fp!r} does not match collection "
                          f"{spec.id!r} ({spec.fingerprint!r})", reason="fingerprint")


def decode_message(spec: CollectionLike, oracle: Mechanism,
                   data: bytes) -> tuple[str, Reports]:
    """Decode and fully validate a message of ``spec``; raises only ReportError."""
    data = _as_bytes(data)
    try:
        if data[:4] == MESSAGE_MAGIC:
            cid, fp, off = _peek_binary(data)
            _check_envelope(spec, cid, fp)
            return cid, wire.decode(oracle, data[off:])
        if data.lstrip()[:1] != b"{":
            _bad_magic(data)
        obj = _load_json(data)
        _check_envelope(spec, obj["collection"], obj["fingerprint"])
        extra = sorted(set(obj) - _JSON_KEYS)
        if extra or "reports" not in obj:
            raise ReportError(f"JSON message has keys {sorted(obj)}, expected "
                              f"{sorted(_JSON_KEYS)}", reason="schema")
        return obj["collection"], wire.from_records(oracle, obj["reports"])
    except ReportError:
        raise
    except (LDPError, ValueError, TypeError, KeyError, IndexError, OverflowError,
            RecursionError, MemoryError) as exc:
        # The decoders check everything they know of; anything else is still the
        # message's fault, and the contract is one exception type.
        raise ReportError(f"undecodable message: {type(exc).__name__}: {exc}",
                          reason="invalid") from None


def message_report_count(data: Any) -> int:
    """How many reports a message says it holds (1 when that is unreadable).

    For metrics of rejected messages: never raises.
    """
    try:
        data = _as_bytes(data)
        if data[:4] == MESSAGE_MAGIC:
            _, _, off = _peek_binary(data)
            return max(wire.peek(data[off:]).n, 1)
    except ReportError:
        pass
    return 1


class MessageDecoder:
    """Decodes the messages of one collection, many at a time.

    The fast path concatenates well-framed binary messages (the spec's envelope,
    the oracle's wire header and column table, the exact length) and validates
    the columns once; any message that is not well framed, or a batch that fails
    validation, is decoded message by message to find the bad ones.

    Parameters
    ----------
    spec : CollectionLike
        The collection (a :class:`~ldpcore.collection.CollectionSpec`).
    oracle : Mechanism, optional
        ``spec.oracle()`` unless given.
    """

    def __init__(self, spec: CollectionLike, oracle: Mechanism | None = None) -> None:
        self.spec = spec
        self.oracle = oracle if oracle is not None else spec.oracle()
        # The fixed bytes of a binary message: envelope + wire header up to the count,
        # then (after the u32 count) the column table.
        empty = wire.encode(self._empty())
        at = wire.count_offset(empty)
        self._prefix = _envelope(spec) + empty[:at]
        self._table = empty[at + 4:]
        self._row_bytes = tuple(np.dtype(c.dtype).itemsize * (c.width if c.bits else 1)
                                for c in self.oracle.report_columns)

    def decode(self, data: bytes) -> Reports:
        """One message, fully validated; raises only :class:`ReportError`."""
        return decode_message(self.spec, self.oracle, data)[1]

    def _concat(self, values: Sequence[bytes]) -> Reports | None:
        if len(values) >= 8 and len(set(map(len, values))) == 1:
            return self._concat_uniform(values)
        p, t = len(self._prefix), len(self._table)
        parts: list[list[bytes]] = [[] for _ in self._row_bytes]
        rb = sum(self._row_bytes)
        for v in values:
            if not v.startswith(self._prefix) or not v.startswith(self._table, p + 4):
                return None
            n = int.from_bytes(v[p:p + 4], "little")
            off = p + 4 + t
            if len(v) != off + n * rb:
                return None
            for i, w in enumerate(self._row_bytes):
                parts[i].append(v[off:off + n * w])
                off += n * w
        cols: dict[str, np.ndarray] = {}
        for c, chunks in zip(self.oracle.report_columns, parts, strict=True):
            arr = np.frombuffer(b"".join(chunks), dtype=np.dtype(c.dtype).newbyteorder("<"))
            cols[c.name] = arr.reshape(-1, c.width) if c.bits else arr
        return Reports(self.oracle.mechanism, self.oracle.fingerprint, cols)

    def _concat_uniform(self, values: Sequence[bytes]) -> Reports | None:
        """:meth:`_concat` for messages of one length, checked as one 2-D byte array.

        Single-report messages arrive by the hundred thousand: a per-message loop in
        Python would cost more than the consumer itself.
        """
        p, t, rb = len(self._prefix), len(self._table), sum(self._row_bytes)
        m, size = len(values), len(values[0])
        off = p + 4 + t
        if size < off or (size - off) % max(rb, 1) or (rb == 0 and size != off):
            return None
        n = (size - off) // rb if rb else 0
        rows = np.frombuffer(b"".join(values), dtype=np.uint8).reshape(m, size)
        head = np.frombuffer(self._prefix + n.to_bytes(4, "little") + self._table,
                             dtype=np.uint8)
        if not (rows[:, :off] == head).all():
            return None
        cols: dict[str, np.ndarray] = {}
        for c, w in zip(self.oracle.report_columns, self._row_bytes, strict=True):
            block = np.ascontiguousarray(rows[:, off:off + n * w])
            arr = block.view(np.dtype(c.dtype).newbyteorder("<")).reshape(-1)
            cols[c.name] = arr.reshape(-1, c.width) if c.bits else arr
            off += n * w
        return Reports(self.oracle.mechanism, self.oracle.fingerprint, cols)

    def decode_many(self, values: Sequence[Any]
                    ) -> tuple[Reports, list[tuple[int, ReportError]]]:
        """All good reports of ``values`` as one batch, and (index, error) of the bad ones."""
        if all(isinstance(v, bytes) for v in values):
            fast = self._concat(values)
            if fast is not None:
                try:
                    return self.oracle.validate(fast), []
                except ReportError:
                    pass  # some message is bad: find it below
        good: list[Reports] = []
        bad: list[tuple[int, ReportError]] = []
        for i, v in enumerate(values):
            try:
                good.append(self.decode(v))
            except ReportError as exc:
                bad.append((i, exc))
        if not good:
            return self.oracle.validate(self._empty()), bad
        return (good[0] if len(good) == 1 else Reports.concat(good)), bad

    def aggregate(self, data: bytes) -> State:
        """The state of one message (validated once); raises only :class:`ReportError`."""
        reports = self.decode(data)
        return State(self.oracle.fingerprint, len(reports),
                     self.oracle._aggregate(reports.columns))

    def aggregate_many(self, values: Sequence[Any]) -> tuple[State, list[tuple[int, ReportError]]]:
        """:meth:`decode_many`, then the state of the good reports (validated once)."""
        reports, bad = self.decode_many(values)
        if not len(reports):
            return self.oracle.new_state(), bad
        return State(self.oracle.fingerprint, len(reports),
                     self.oracle._aggregate(reports.columns)), bad

    def _empty(self) -> Reports:
        return Reports(self.oracle.mechanism, self.oracle.fingerprint, {
            c.name: np.zeros((0, c.width) if c.bits else (0,), dtype=c.dtype)
            for c in self.oracle.report_columns})
