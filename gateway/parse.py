"""Request bodies → messages of known collections, or the 4xx that says what is wrong.

Three media types (see ``docs/gateway.md``):

* ``application/octet-stream``: one binary message (:mod:`ldpcore.message` envelope);
* ``application/x-ldp-frames``: binary messages, each framed by a u32 little-endian
  byte length;
* ``application/json``: one JSON message object ``{"collection", "fingerprint",
  "reports"}`` or a JSON array of them;
* ``application/x-ldp-token-frames``: binary messages each with its Privacy Pass tokens
  (one per report): ``u16 LE count, count × 354-byte tokens, u32 LE length, message``.

Tokens (docs/privacy-pass.md) ride with their message: in the ``Authorization:
PrivateToken token=…`` header for an octet-stream body, in the token frames, or as a
``"tokens"`` array (base64url) in a JSON message.  They are only *read* here (length and
base64url); :mod:`gateway.tokens` verifies and spends them.

:func:`parse_body` checks, per message, everything that can be checked without
numpy work: the envelope, the collection (against the :class:`Catalogue`), the
fingerprint and the exact framing of the columns (the bytes a message of that
collection must start with, and its length from the report count).  A binary message
that passes is a :class:`Message` holding its bytes; the report *values* are
validated later, many messages at once (:meth:`CollectionEntry.validate_many`, one
vectorised pass per collection and batch).  Anything else (JSON, or binary in a
layout other than the canonical one) is decoded and fully validated here.

The contract: for any body, :func:`parse_body` returns messages or raises
:class:`BodyError` (status 400/404/415), never anything else (the fuzz tests hold it
to that).

>>> from ldpcore.collection import CollectionSpec
>>> from ldpcore.message import encode_message
>>> spec = CollectionSpec.from_dict({"id": "os", "oracle": {"mechanism": "grr", "epsilon": 1.0},
...     "domain": {"kind": "categories", "labels": ["a", "b"]}})
>>> cat = Catalogue([spec])
>>> msg = encode_message(spec, spec.oracle().perturb([0, 1, 1], rng=1))
>>> [(m.entry.spec.id, m.n) for m in parse_body(FRAMES, frame([msg, msg]), cat)]
[('os', 3), ('os', 3)]
>>> parse_body(OCTETS, msg[:-1], cat)
Traceback (most recent call last):
...
gateway.parse.BodyError: 400 truncated at 0: batch truncated: column 'y' needs 6 bytes, 5 left
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcore import Reports, wire
from ldpcore.base import Mechanism
from ldpcore.collection import CollectionSpec
from ldpcore.errors import LDPError, ReportError
from ldpcore.message import (
    MAX_JSON_DEPTH,
    MESSAGE_MAGIC,
    MessageDecoder,
    message_prefix,
    peek_message,
)

__all__ = ["BodyError", "Catalogue", "CollectionEntry", "Message", "UnknownCollection",
           "OCTETS", "FRAMES", "JSON", "TOKEN_FRAMES", "MEDIA_TYPES", "frame", "token_frame",
           "media_type", "parse_body"]

OCTETS = "application/octet-stream"
FRAMES = "application/x-ldp-frames"
JSON = "application/json"
TOKEN_FRAMES = "application/x-ldp-token-frames"
MEDIA_TYPES = (OCTETS, FRAMES, JSON, TOKEN_FRAMES)
TOKEN_LEN = 354
"""Bytes of a type 2 Privacy Pass token (RFC 9578)."""

_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_JSON_KEYS = {"collection", "fingerprint", "reports"}
_U32 = struct.Struct("<I")
_U16 = struct.Struct("<H")


class BodyError(Exception):
    """A request the gateway refuses: HTTP ``status``, machine ``reason``, ``index`` of the
    message at fault (None when no message is)."""

    def __init__(self, status: int, reason: str, detail: str, index: int | None = None) -> None:
        super().__init__(detail)
        self.status, self.reason, self.detail, self.index = status, reason, detail, index
        self.www_authenticate: str | None = None
        """A ``WWW-Authenticate`` value to send with a 401 (Privacy Pass challenges)."""

    def __str__(self) -> str:
        at = "" if self.index is None else f" at {self.index}"
        return f"{self.status} {self.reason}{at}: {self.detail}"

    def body(self) -> dict[str, Any]:
        """The JSON error body: ``{"detail", "reason", "index"}`` (index only if known)."""
        out: dict[str, Any] = {"detail": self.detail, "reason": self.reason}
        if self.index is not None:
            out["index"] = self.index
        return out


class UnknownCollection(Exception):
    """A message names a collection missing from the catalogue (the caller may look it up
    in Redis and parse again, or answer 404)."""

    def __init__(self, collection: str, index: int) -> None:
        super().__init__(collection)
        self.collection, self.index = collection, index


def media_type(content_type: str | bytes | None) -> str | None:
    """The bare media type of a Content-Type header (lower case, parameters dropped).

    >>> media_type(b"Application/JSON; charset=utf-8")
    'application/json'
    """
    if content_type is None:
        return None
    if isinstance(content_type, bytes):
        content_type = content_type.decode("latin-1")
    return content_type.split(";", 1)[0].strip().lower()


def frame(messages: Iterable[bytes]) -> bytes:
    """An ``application/x-ldp-frames`` body: each message after its u32 LE byte length."""
    return b"".join(_U32.pack(len(m)) + m for m in messages)


def token_frame(items: Iterable[tuple[Sequence[bytes], bytes]]) -> bytes:
    """An ``application/x-ldp-token-frames`` body of (tokens, message) pairs."""
    return b"".join(_U16.pack(len(toks)) + b"".join(toks) + _U32.pack(len(m)) + m
                    for toks, m in items)


class CollectionEntry:
    """What the gateway keeps of one collection: spec, oracle, decoder and the canonical
    binary layout of its messages (envelope + wire header up to the count, the column
    table after it, bytes per report)."""

    __slots__ = ("spec", "oracle", "decoder", "envelope", "prefix", "table", "row_bytes", "cid",
                 "fingerprint", "col_bytes")

    def __init__(self, spec: CollectionSpec) -> None:
        self.spec = spec
        self.cid = spec.id
        self.fingerprint = spec.fingerprint
        self.oracle: Mechanism = spec.oracle()
        self.decoder = MessageDecoder(spec, self.oracle)
        cols = self.oracle.report_columns
        empty = wire.encode(Reports(self.oracle.mechanism, self.oracle.fingerprint, {
            c.name: np.zeros((0, c.width) if c.bits else (0,), dtype=c.dtype) for c in cols}))
        at = wire.count_offset(empty)
        self.envelope = message_prefix(spec)
        self.prefix = self.envelope + empty[:at]
        self.table = empty[at + 4:]
        self.col_bytes = tuple(np.dtype(c.dtype).itemsize * (c.width if c.bits else 1)
                               for c in cols)
        self.row_bytes = sum(self.col_bytes)

    def framed_count(self, data: bytes) -> int:
        """Reports in ``data`` if it is a message in the canonical layout, else -1."""
        p = len(self.prefix)
        if not data.startswith(self.prefix) or not data.startswith(self.table, p + 4):
            return -1
        n: int = _U32.unpack_from(data, p)[0]
        if len(data) != p + 4 + len(self.table) + n * self.row_bytes:
            return -1
        return n

    def validate_many(self, values: Sequence[bytes]
                      ) -> tuple[Reports, list[tuple[int, ReportError]]]:
        """All reports of canonically framed ``values`` (one vectorised check), and the
        (position, error) of any bad one."""
        return self.decoder.decode_many(values)

    def encode(self, reports: Reports) -> bytes:
        """One binary message of this collection holding ``reports``."""
        return self.envelope + wire.encode(reports)


class Catalogue:
    """Collections the gateway accepts, by id (str) and by the id's bytes.

    Replaced as a whole when the Redis catalogue is re-read (readers never see a
    half-updated one).
    """

    def __init__(self, specs: Iterable[CollectionSpec] = ()) -> None:
        self.by_id: dict[str, CollectionEntry] = {}
        self.by_bytes: dict[bytes, CollectionEntry] = {}
        for spec in specs:
            self.add(spec)

    def add(self, spec: CollectionSpec) -> CollectionEntry:
        old = self.by_id.get(spec.id)
        if old is not None and old.fingerprint == spec.fingerprint:
            return old
        entry = CollectionEntry(spec)
        self.by_id[spec.id] = entry
        self.by_bytes[spec.id.encode("ascii")] = entry
        return entry

    def __len__(self) -> int:
        return len(self.by_id)

    def __contains__(self, cid: object) -> bool:
        return cid in self.by_id


@dataclass(slots=True)
class Message:
    """One accepted message: its collection, its bytes if canonically framed (values not yet
    validated) or else its decoded, validated reports, and its report count.

    ``messages`` > 1: this one stands for that many frames of an ``x-ldp-frames`` body
    (``frames``) merged into one canonical message (see :func:`_uniform_frames`), or of
    an ``x-ldp-token-frames`` body (``token_frames``; :func:`_uniform_token_frames`): the
    frames' tokens in order then, ``len(tokens) // messages`` per frame."""

    entry: CollectionEntry
    raw: bytes | None
    reports: Reports | None
    n: int
    messages: int = 1
    frames: bytes | None = None
    tokens: list[bytes] | None = None
    """The Privacy Pass tokens that came with this message (None: none came)."""
    token_frames: bool = False
    """``frames`` is an ``x-ldp-token-frames`` body."""

    def first_bad(self) -> tuple[int, ReportError] | None:
        """Position and error of the first bad frame of a merged message (None if none)."""
        if self.frames is None:
            return None
        split = _token_frame_messages if self.token_frames else _split_frames
        for i, f in enumerate(split(self.frames)):
            try:
                self.entry.decoder.decode(f)
            except ReportError as exc:
                return i, exc
        return None


def _report_error(exc: ReportError, index: int) -> BodyError:
    return BodyError(400, exc.reason, str(exc), index)


def _binary(data: bytes, index: int, cat: Catalogue) -> Message:
    if not data:
        raise BodyError(400, "truncated", "the message is empty", index)
    if data[:4] == MESSAGE_MAGIC and len(data) >= 6:
        entry = cat.by_bytes.get(data[6:6 + data[5]])
        if entry is not None:
            n = entry.framed_count(data)
            if n >= 0:
                return Message(entry, data, None, n)
            try:
                reports = entry.decoder.decode(data)
            except ReportError as exc:
                raise _report_error(exc, index) from None
            return Message(entry, None, reports, len(reports))
    elif data.lstrip()[:1] in (b"{", b"["):
        raise BodyError(400, "garbage", "this is JSON: send it as application/json", index)
    try:
        cid, _ = peek_message(data)
    except ReportError as exc:
        raise _report_error(exc, index) from None
    raise UnknownCollection(cid, index)


UNIFORM_MIN = 8
"""Frames bodies of at least this many frames try the vectorised path first."""


def _uniform_frames(body: bytes, cat: Catalogue) -> Message | None:
    """A frames body of k ≥ :data:`UNIFORM_MIN` frames of one length, all canonical messages
    of one collection with the same header and report count, as *one* canonical message of
    all their reports (numpy slicing, no per-frame Python); None if it is not that."""
    size = len(body)
    if size < 4:
        return None
    step = 4 + _U32.unpack_from(body, 0)[0]
    if step < 26 or size % step or size // step < UNIFORM_MIN:
        return None
    first = body[4:step]
    if first[:4] != MESSAGE_MAGIC:
        return None
    entry = cat.by_bytes.get(first[6:6 + first[5]])
    if entry is None:
        return None
    n0 = entry.framed_count(first)
    if n0 < 0:
        return None
    k = size // step
    arr = np.frombuffer(body, dtype=np.uint8).reshape(k, step)
    head = 4 + len(entry.prefix) + 4 + len(entry.table)
    if not (arr[:, :head] == arr[0, :head]).all():
        return None
    parts = [entry.prefix, _U32.pack(k * n0), entry.table]
    off = head
    for w in entry.col_bytes:
        parts.append(arr[:, off:off + n0 * w].tobytes())
        off += n0 * w
    return Message(entry, b"".join(parts), None, k * n0, k, body)


def _split_frames(body: bytes) -> list[bytes]:
    out: list[bytes] = []
    off, end = 0, len(body)
    while off < end:
        if end - off < 4:
            raise BodyError(400, "truncated", f"frame {len(out)}: the body ends inside a "
                            "4-byte length", len(out))
        (ln,) = _U32.unpack_from(body, off)
        off += 4
        if ln > end - off:
            raise BodyError(400, "truncated", f"frame {len(out)} announces {ln} bytes, "
                            f"{end - off} remain", len(out))
        out.append(body[off:off + ln])
        off += ln
    return out


def _json_depth(data: bytes) -> int:
    skeleton = data.translate(None, _NOT_BRACKETS)
    if not skeleton:
        return 0
    a = np.frombuffer(skeleton, dtype=np.uint8)
    step = np.where((a == ord("[")) | (a == ord("{")), 1, -1)
    return int(np.cumsum(step).max())


def _json_message(obj: Any, index: int, cat: Catalogue) -> Message:
    if not isinstance(obj, dict):
        raise BodyError(400, "schema", f"message {index} must be a JSON object, got "
                        f"{type(obj).__name__}", index)
    cid, fp = obj.get("collection"), obj.get("fingerprint")
    if not isinstance(cid, str) or not isinstance(fp, str):
        raise BodyError(400, "schema", "a JSON message needs string 'collection' and "
                        "'fingerprint'", index)
    keys = set(obj)
    if keys != _JSON_KEYS and keys != _JSON_KEYS | {"tokens"}:
        raise BodyError(400, "schema", f"JSON message has keys {sorted(obj)}, expected "
                        f"{sorted(_JSON_KEYS)} (and optionally 'tokens')", index)
    entry = cat.by_id.get(cid)
    if entry is None:
        raise UnknownCollection(cid, index)
    if fp != entry.fingerprint:
        raise BodyError(400, "fingerprint", f"message fingerprint {fp!r} does not match "
                        f"collection {cid!r} ({entry.fingerprint!r})", index)
    try:
        reports = wire.from_records(entry.oracle, obj["reports"])
    except ReportError as exc:
        raise _report_error(exc, index) from None
    except (LDPError, ValueError, TypeError, KeyError, IndexError, OverflowError,
            RecursionError, MemoryError) as exc:
        raise BodyError(400, "invalid", f"undecodable message: {type(exc).__name__}: {exc}",
                        index) from None
    msg = Message(entry, None, reports, len(reports))
    if "tokens" in obj:
        toks = obj["tokens"]
        if not isinstance(toks, list) or not all(isinstance(t, str) for t in toks):
            raise BodyError(400, "token_malformed", "'tokens' must be an array of base64url "
                            "strings", index)
        msg.tokens = [_token_b64(t, index) for t in toks]
    return msg


def _token_b64(text: str | bytes, index: int) -> bytes:
    from ldpstream.privacypass.tokens import TokenError, b64url_decode

    try:
        raw = b64url_decode(text)
    except TokenError:
        raise BodyError(400, "token_malformed", "a token is not base64url", index) from None
    if len(raw) != TOKEN_LEN:
        raise BodyError(400, "token_malformed", f"a type 2 token is {TOKEN_LEN} bytes, got "
                        f"{len(raw)}", index)
    return raw


def _uniform_token_frames(body: bytes, cat: Catalogue) -> Message | None:
    """A token frames body of k ≥ :data:`UNIFORM_MIN` frames of one layout — each ``c``
    tokens of type 2 and a canonical message of ``c`` reports of one collection, all with
    the same header — as *one* canonical message of all their reports and the list of
    all their tokens (numpy slicing, no per-frame Python); None if it is not that.

    A relay forwarding one report per device sends exactly this; anything else (a token
    count that does not match the reports, frames of several collections…) takes the
    frame-by-frame path, which names the frame at fault."""
    size = len(body)
    if size < 6:
        return None
    (count,) = _U16.unpack_from(body, 0)
    at = 2 + count * TOKEN_LEN
    if count == 0 or size < at + 4:
        return None
    step = at + 4 + _U32.unpack_from(body, at)[0]
    if size % step or size // step < UNIFORM_MIN:
        return None
    first = body[at + 4:step]
    if first[:4] != MESSAGE_MAGIC or len(first) < 6:
        return None
    entry = cat.by_bytes.get(first[6:6 + first[5]])
    if entry is None or entry.framed_count(first) != count:
        return None
    k = size // step
    arr = np.frombuffer(body, dtype=np.uint8).reshape(k, step)
    head = at + 4 + len(entry.prefix) + 4 + len(entry.table)
    # every frame: the same token count, message length and message header; every token
    # of type 0x0002 (the others are refused one by one by the gate: take the slow path)
    toks = arr[:, 2:at].reshape(k * count, TOKEN_LEN)
    if (not (arr[:, :2] == arr[0, :2]).all() or not (arr[:, at:head] == arr[0, at:head]).all()
            or toks[:, 0].any() or not (toks[:, 1] == 2).all()):
        return None
    blob = toks.tobytes()
    tokens = [blob[i:i + TOKEN_LEN] for i in range(0, len(blob), TOKEN_LEN)]
    parts = [entry.prefix, _U32.pack(k * count), entry.table]
    off = head
    for w in entry.col_bytes:
        parts.append(arr[:, off:off + count * w].tobytes())
        off += count * w
    return Message(entry, b"".join(parts), None, k * count, k, body, tokens, True)


def _token_frame_messages(body: bytes) -> list[bytes]:
    """The messages of a well-formed token frames body (tokens skipped)."""
    out: list[bytes] = []
    off = 0
    while off < len(body):
        (count,) = _U16.unpack_from(body, off)
        off += 2 + count * TOKEN_LEN
        (ln,) = _U32.unpack_from(body, off)
        out.append(body[off + 4:off + 4 + ln])
        off += 4 + ln
    return out


def _token_frames(body: bytes, cat: Catalogue) -> list[Message]:
    merged = _uniform_token_frames(body, cat)
    if merged is not None:
        return [merged]
    out: list[Message] = []
    off, end = 0, len(body)
    while off < end:
        i = len(out)
        if end - off < 2:
            raise BodyError(400, "truncated", f"frame {i}: the body ends inside the token "
                            "count", i)
        (count,) = _U16.unpack_from(body, off)
        off += 2
        if end - off < count * TOKEN_LEN + 4:
            raise BodyError(400, "token_malformed", f"frame {i}: {count} token(s) announced, "
                            "the body ends first", i)
        toks = [body[off + j * TOKEN_LEN:off + (j + 1) * TOKEN_LEN] for j in range(count)]
        off += count * TOKEN_LEN
        (ln,) = _U32.unpack_from(body, off)
        off += 4
        if ln > end - off:
            raise BodyError(400, "truncated", f"frame {i} announces {ln} bytes, {end - off} "
                            "remain", i)
        msg = _binary(body[off:off + ln], i, cat)
        msg.tokens = toks
        out.append(msg)
        off += ln
    if not out:
        raise BodyError(400, "truncated", "the body holds no frame", 0)
    return out


def _json_body(body: bytes, cat: Catalogue) -> list[Message]:
    depth = _json_depth(body)
    if depth > MAX_JSON_DEPTH + 1:
        raise BodyError(400, "too_large", f"JSON nested {depth} deep, the format allows "
                        f"{MAX_JSON_DEPTH + 1} (an array of messages)", 0)
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise BodyError(400, "garbage", f"the body is not valid JSON: {exc}", 0) from None
    if isinstance(doc, dict):
        return [_json_message(doc, 0, cat)]
    if isinstance(doc, list):
        if not doc:
            raise BodyError(400, "schema", "the JSON array holds no message", 0)
        return [_json_message(obj, i, cat) for i, obj in enumerate(doc)]
    raise BodyError(400, "schema", "the body must be a JSON message object or an array of "
                    f"them, got {type(doc).__name__}", 0)


def parse_body(mtype: str | None, body: bytes, cat: Catalogue,
               authorization: bytes | None = None) -> list[Message]:
    """The messages of a request body of media type ``mtype`` (see the module docstring);
    ``authorization``: the request's Authorization header (a ``PrivateToken`` token rides
    with an octet-stream message).

    Raises :class:`BodyError` (400 with the message's ``ReportError.reason``, or 415) or
    :class:`UnknownCollection`; never anything else.
    """
    if mtype == OCTETS:
        msg = _binary(body, 0, cat)
        if authorization is not None and authorization.lstrip()[:12].lower() == b"privatetoken":
            from ldpstream.privacypass.tokens import TokenError, parse_private_token_auth

            try:
                token = parse_private_token_auth(authorization)
            except TokenError as exc:
                raise BodyError(400, "token_malformed", str(exc), 0) from None
            if token is not None:
                if len(token) != TOKEN_LEN:
                    raise BodyError(400, "token_malformed", f"a type 2 token is {TOKEN_LEN} "
                                    f"bytes, got {len(token)}", 0)
                msg.tokens = [token]
        return [msg]
    if mtype == TOKEN_FRAMES:
        return _token_frames(body, cat)
    if mtype == FRAMES:
        merged = _uniform_frames(body, cat)
        if merged is not None:
            return [merged]
        frames = _split_frames(body)
        if not frames:
            raise BodyError(400, "truncated", "the body holds no frame", 0)
        return [_binary(f, i, cat) for i, f in enumerate(frames)]
    if mtype == JSON:
        return _json_body(body, cat)
    raise BodyError(415, "media_type", f"Content-Type must be one of {', '.join(MEDIA_TYPES)}"
                    f", got {mtype!r}")
