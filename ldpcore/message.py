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
import logging
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

import numpy as np

import ldpcore.wire as wire

from .base import Mechanism, Reports, State
from .errors import LDPError, ParameterError, ReportError

__all__ = [
    "CollectionLike",
    "Decoded",
    "MESSAGE_MAGIC",
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "MessageDecoder",
    "decode_group",
    "decode_message",
    "encode_message",
    "message_prefix",
    "message_report_count",
    "peek_message",
    "FrameError",
    "MessageLayout",
    "UNIFORM_MIN",
    "check_envelope",
    "check_json_keys",
    "frame",
    "json_depth",
    "json_envelope",
    "json_reports",
    "load_json",
    "split_frames",
    "token_frame",
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


def json_depth(data: bytes) -> int:
    """Deepest bracket nesting of ``data``, counting brackets anywhere (C-speed scan).

    Brackets inside strings count too: no valid message has any (ids, fingerprints,
    mechanism and column names are bracket-free), so this never refuses a good one.

    >>> json_depth(b'[{"a": [1, [2]]}, []]')
    4
    """
    skeleton = data.translate(None, _NOT_BRACKETS)
    if not skeleton:
        return 0
    a = np.frombuffer(skeleton, dtype=np.uint8)
    step = np.where((a == ord("[")) | (a == ord("{")), 1, -1)
    return int(np.cumsum(step).max())


def load_json(data: bytes, *, max_depth: int = MAX_JSON_DEPTH,
              max_bytes: int | None = MAX_JSON_BYTES, what: str = "") -> Any:
    """Parse JSON bounded before parsing: at most ``max_bytes`` bytes (None: no bound) and
    ``max_depth`` levels of brackets (``what`` names that depth in the error); raises only
    :class:`ReportError` (``too_large`` or ``garbage``)."""
    if max_bytes is not None and len(data) > max_bytes:
        raise ReportError(f"JSON message of {len(data)} bytes exceeds {max_bytes}",
                          reason="too_large")
    depth = json_depth(data)
    if depth > max_depth:
        raise ReportError(f"JSON nested {depth} deep, the format allows {max_depth}{what}",
                          reason="too_large")
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ReportError(f"message is not valid JSON: {exc}", reason="garbage") from None


def json_envelope(obj: Any) -> tuple[str, str]:
    """(collection id, fingerprint) of a parsed JSON message; raises ReportError ``schema``
    if ``obj`` is not an object with string ``collection`` and ``fingerprint``."""
    if not isinstance(obj, dict):
        raise ReportError(f"JSON message must be an object, got {type(obj).__name__}",
                          reason="schema")
    cid, fp = obj.get("collection"), obj.get("fingerprint")
    if not isinstance(cid, str) or not isinstance(fp, str):
        raise ReportError("JSON message needs string 'collection' and 'fingerprint'",
                          reason="schema")
    return cid, fp


def check_json_keys(obj: dict[str, Any], optional: Sequence[str] = ()) -> None:
    """Raise ReportError ``schema`` unless ``obj`` has exactly the message keys (and any of
    ``optional``)."""
    keys = set(obj)
    if not _JSON_KEYS <= keys or keys - _JSON_KEYS - set(optional):
        also = "".join(f" (and optionally {k!r})" for k in optional)
        raise ReportError(f"JSON message has keys {sorted(obj)}, expected "
                          f"{sorted(_JSON_KEYS)}{also}", reason="schema")


_UNDECODABLE = (LDPError, ValueError, TypeError, KeyError, IndexError, OverflowError,
                RecursionError, MemoryError)
"""What a decoder may raise on bad data besides ReportError: still the message's fault."""


def _undecodable(exc: BaseException) -> ReportError:
    return ReportError(f"undecodable message: {type(exc).__name__}: {exc}", reason="invalid")


def json_reports(oracle: Mechanism, records: Any) -> Reports:
    """The validated reports of a JSON message's ``reports``; raises only ReportError."""
    try:
        return wire.from_records(oracle, records)
    except ReportError:
        raise
    except _UNDECODABLE as exc:
        raise _undecodable(exc) from None


def _load_json(data: bytes) -> dict[str, Any]:
    obj: dict[str, Any] = load_json(data)
    json_envelope(obj)
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


def check_envelope(spec: CollectionLike, cid: str, fp: str) -> None:
    """Raise ReportError ``wrong_collection`` or ``fingerprint`` unless a message's
    envelope (``cid``, ``fp``) is that of ``spec``."""
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
            check_envelope(spec, cid, fp)
            return cid, wire.decode(oracle, data[off:])
        if data.lstrip()[:1] != b"{":
            _bad_magic(data)
        obj = _load_json(data)
        check_envelope(spec, obj["collection"], obj["fingerprint"])
        check_json_keys(obj)
        return obj["collection"], wire.from_records(oracle, obj["reports"])
    except ReportError:
        raise
    except _UNDECODABLE as exc:
        # The decoders check everything they know of; anything else is still the
        # message's fault, and the contract is one exception type.
        raise _undecodable(exc) from None


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


_U32 = struct.Struct("<I")
_U16 = struct.Struct("<H")


def _empty_reports(oracle: Mechanism) -> Reports:
    return Reports(oracle.mechanism, oracle.fingerprint, {
        c.name: np.zeros((0, c.width) if c.bits else (0,), dtype=c.dtype)
        for c in oracle.report_columns})


class MessageLayout:
    """The canonical binary layout of one collection's messages, for checking framing
    without decoding: ``prefix`` (envelope + wire header up to the u32 report count), the
    u32 count, ``table`` (the column table), then per column ``n × col_bytes[i]`` bytes.

    A message in this layout needs only its values validated
    (:meth:`~ldpcore.base.Mechanism.validate`); any other message is decoded in full.

    >>> from ldpcore.collection import CollectionSpec
    >>> spec = CollectionSpec.from_dict({"id": "os", "oracle": {"mechanism": "grr",
    ...     "epsilon": 1.0}, "domain": {"kind": "categories", "labels": ["a", "b"]}})
    >>> lay = MessageLayout(spec, spec.oracle())
    >>> msg = encode_message(spec, spec.oracle().perturb([0, 1, 1], rng=1))
    >>> lay.framed_count(msg), lay.framed_count(msg + b"x"), lay.row_bytes
    (3, -1, 2)
    """

    __slots__ = ("prefix", "table", "col_bytes", "row_bytes", "head")

    def __init__(self, spec: CollectionLike, oracle: Mechanism) -> None:
        empty = wire.encode(_empty_reports(oracle))
        at = wire.count_offset(empty)
        self.prefix = _envelope(spec) + empty[:at]
        self.table = empty[at + 4:]
        self.col_bytes = tuple(np.dtype(c.dtype).itemsize * (c.width if c.bits else 1)
                               for c in oracle.report_columns)
        self.row_bytes = sum(self.col_bytes)
        self.head = len(self.prefix) + 4 + len(self.table)
        """Bytes before the first column."""

    def framed_count(self, data: bytes) -> int:
        """Reports in ``data`` if it is a message in the canonical layout, else -1."""
        p = len(self.prefix)
        if not data.startswith(self.prefix) or not data.startswith(self.table, p + 4):
            return -1
        n: int = _U32.unpack_from(data, p)[0]
        if len(data) != self.head + n * self.row_bytes:
            return -1
        return n

    def encode(self, n: int, columns: Sequence[bytes]) -> bytes:
        """The canonical message of ``n`` reports whose columns' bytes are ``columns``."""
        return b"".join((self.prefix, _U32.pack(n), self.table, *columns))

    def uniform_columns(self, rows: np.ndarray, start: int = 0, lead: int = 0
                        ) -> tuple[int, list[np.ndarray]] | None:
        """Rows of a 2-D byte array that each hold, from column ``start`` to their end, a
        canonical message of one report count ``n``, after the same ``lead`` bytes (a
        frame's length, say): ``n`` and each report column of all rows as a
        ``(rows, n × col_bytes)`` byte block; None if they do not.

        Messages by the hundred thousand are checked this way as one array (the first
        row's message, then one comparison of every row's header with it): a loop per
        message in Python would cost more than the rest of their path."""
        n = self.framed_count(rows[0, start:].tobytes()) if len(rows) else -1
        heads = rows[:, start - lead:start + self.head]
        # bytes, not an elementwise ==: one strided copy and a memcmp, ~2.5× faster
        if n < 0 or heads.tobytes() != heads[0].tobytes() * len(rows):
            return None
        blocks, off = [], start + self.head
        for w in self.col_bytes:
            blocks.append(rows[:, off:off + n * w])
            off += n * w
        return n, blocks


UNIFORM_MIN = 8
"""Batches of at least this many messages of one length try the one-array path first."""


class FrameError(ReportError):
    """A body of framed messages whose framing is broken; ``index``: the frame at fault."""

    def __init__(self, message: str, index: int, *, reason: str = "truncated") -> None:
        super().__init__(message, reason=reason)
        self.index = index


def frame(messages: Sequence[bytes]) -> bytes:
    """Messages framed for ``application/x-ldp-frames``: each after its u32 LE byte length.

    >>> split_frames(frame([b"ab", b"", b"c"]))
    [b'ab', b'', b'c']
    """
    return b"".join(_U32.pack(len(m)) + m for m in messages)


def split_frames(body: bytes) -> list[bytes]:
    """The messages of an ``application/x-ldp-frames`` body; raises :class:`FrameError`
    (``truncated``) where a length runs past the body."""
    out: list[bytes] = []
    off, end = 0, len(body)
    while off < end:
        if end - off < 4:
            raise FrameError(f"frame {len(out)}: the body ends inside a 4-byte length",
                             len(out))
        (ln,) = _U32.unpack_from(body, off)
        off += 4
        if ln > end - off:
            raise FrameError(f"frame {len(out)} announces {ln} bytes, {end - off} remain",
                             len(out))
        out.append(body[off:off + ln])
        off += ln
    return out


def token_frame(items: Sequence[tuple[Sequence[bytes], bytes]]) -> bytes:
    """An ``application/x-ldp-token-frames`` body of (tokens, message) pairs: per message
    ``u16 LE count, the count tokens, u32 LE length, message``."""
    return b"".join(_U16.pack(len(toks)) + b"".join(toks) + _U32.pack(len(m)) + m
                    for toks, m in items)


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
        self.layout = MessageLayout(spec, self.oracle)

    def decode(self, data: bytes) -> Reports:
        """One message, fully validated; raises only :class:`ReportError`."""
        return decode_message(self.spec, self.oracle, data)[1]

    def _concat(self, values: Sequence[bytes]) -> Reports | None:
        if len(values) >= UNIFORM_MIN and len(set(map(len, values))) == 1:
            return self._concat_uniform(values)
        lay = self.layout
        parts: list[list[bytes]] = [[] for _ in lay.col_bytes]
        for v in values:
            n = lay.framed_count(v)
            if n < 0:
                return None
            off = lay.head
            for i, w in enumerate(lay.col_bytes):
                parts[i].append(v[off:off + n * w])
                off += n * w
        return self._reports(np.frombuffer(b"".join(chunks), dtype=np.uint8) for chunks in parts)

    def _concat_uniform(self, values: Sequence[bytes]) -> Reports | None:
        """:meth:`_concat` for messages of one length, checked as one 2-D byte array
        (:meth:`MessageLayout.uniform_columns`)."""
        rows = np.frombuffer(b"".join(values), dtype=np.uint8).reshape(len(values), -1)
        split = self.layout.uniform_columns(rows)
        if split is None:
            return None
        return self._reports(np.ascontiguousarray(block) for block in split[1])

    def _reports(self, blocks: Iterable[np.ndarray]) -> Reports:
        """The reports whose columns' little-endian bytes are ``blocks`` (uint8 arrays)."""
        cols: dict[str, np.ndarray] = {}
        for c, block in zip(self.oracle.report_columns, blocks, strict=True):
            arr = block.reshape(-1).view(np.dtype(c.dtype).newbyteorder("<"))
            cols[c.name] = arr.reshape(-1, c.width) if c.bits else arr
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
            return self.oracle.validate(_empty_reports(self.oracle)), bad
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


@dataclass(frozen=True, slots=True)
class Decoded:
    """What a worker needs of its messages, read once: count a state, or dead-letter one.

    :func:`decode_group` turns the messages of one (collection, window) into one
    ``Decoded`` for all their good reports and one per bad message.

    Attributes
    ----------
    collection : str
        The collection id the messages were routed by (their Kafka key).
    window : int
        Start (epoch seconds) of the window the messages' timestamps fall in.
    reports : int
        Good: how many reports ``state`` counts; bad: how many the message says it
        holds (at least 1, for the rejected-reports metric).
    state : State or None
        The aggregate of the good reports; ``None`` for a message to dead-letter.
    reason : str
        Why a message is dead-lettered (a :data:`~ldpcore.errors.REPORT_REASONS` entry,
        ``key_mismatch``, ``unknown_collection`` or ``internal``); ``""`` if good.
    error : str
        The human-readable error of a dead letter.
    index : int
        The dead letter's position among the values given; ``-1`` for the good ones.
    """

    collection: str
    window: int
    reports: int
    state: State | None = None
    reason: str = ""
    error: str = ""
    index: int = -1

    @property
    def dead(self) -> bool:
        """True if this message goes to the dead-letter topic."""
        return self.state is None


_log = logging.getLogger("ldpcore.message")


def decode_group(decoder: MessageDecoder | None, collection: str, window: int,
                 values: Sequence[Any]) -> list[Decoded]:
    """Decode the messages of one (collection, window) once; never raises.

    Returns one :class:`Decoded` with the state of every good report (first, if any
    report is good) and one per bad message, in order.  ``decoder`` is the
    collection's (``None``: no such collection is registered); ``values`` are the
    messages' bytes (``None`` for a tombstone).  A bad message's reason is, in this
    order: what is wrong with its envelope; ``key_mismatch`` if the envelope names
    another collection than ``collection``; ``unknown_collection``; what is wrong with
    its reports.  An unexpected exception (a bug, not the data) dead-letters only the
    message that raised it, with reason ``internal``.

    >>> from ldpcore.collection import CollectionSpec
    >>> spec = CollectionSpec.from_dict({"id": "os", "oracle": {"mechanism": "grr",
    ...     "epsilon": 1.0}, "domain": {"kind": "categories", "labels": ["a", "b"]}})
    >>> good = encode_message(spec, spec.oracle().perturb([0, 1, 1], rng=1))
    >>> [(d.reports, d.reason, d.index) for d in
    ...  decode_group(MessageDecoder(spec), "os", 3600, [good, b"junk", good])]
    [(6, '', -1), (1, 'garbage', 1)]
    """
    if decoder is None:
        return [_dead(collection, window, i, v, None) for i, v in enumerate(values)]
    try:
        state, bad = decoder.aggregate_many(values)
    except Exception:  # a bug on some message: find it by decoding each one alone
        _log.exception("batch of %d messages of %r failed; isolating", len(values), collection)
        return _one_by_one(decoder, collection, window, values)
    out = [Decoded(collection, window, state.n, state)] if state.n else []
    out += [_dead(collection, window, i, values[i], exc) for i, exc in bad]
    return out


def _dead(collection: str, window: int, index: int, value: Any,
          exc: ReportError | None) -> Decoded:
    """The dead letter of a bad message (``exc`` None: its collection is unknown)."""
    data = value if value is not None else b""
    try:
        mid, _ = peek_message(data)
    except ReportError as err:
        return Decoded(collection, window, 1, None, err.reason, str(err), index)
    if mid != collection:
        return Decoded(collection, window, 1, None, "key_mismatch",
                       f"message key {collection!r} but envelope collection {mid!r}", index)
    if exc is None:
        return Decoded(collection, window, 1, None, "unknown_collection",
                       f"no collection {collection!r} registered", index)
    return Decoded(collection, window, message_report_count(data), None, exc.reason,
                   str(exc), index)


def _one_by_one(decoder: MessageDecoder, collection: str, window: int,
                values: Sequence[Any]) -> list[Decoded]:
    total: State | None = None
    dead: list[Decoded] = []
    for i, v in enumerate(values):
        try:
            st = decoder.aggregate(v if v is not None else b"")
        except ReportError as exc:
            dead.append(_dead(collection, window, i, v, exc))
            continue
        except Exception as exc:  # a poison message: isolate it
            _log.exception("unexpected error on message %d of %r", i, collection)
            dead.append(Decoded(collection, window, 1, None, "internal",
                                f"{type(exc).__name__}: {exc}", i))
            continue
        if total is None:
            total = st
        else:
            total += st
    good = [Decoded(collection, window, total.n, total)] if total is not None and total.n \
        else []
    return good + dead
