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

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcore import Reports
from ldpcore.base import Mechanism
from ldpcore.collection import CollectionSpec
from ldpcore.errors import ReportError
from ldpcore.message import (
    MAX_JSON_DEPTH,
    MESSAGE_MAGIC,
    UNIFORM_MIN,
    FrameError,
    MessageDecoder,
    MessageLayout,
    check_envelope,
    check_json_keys,
    encode_message,
    frame,
    json_envelope,
    json_reports,
    load_json,
    peek_message,
    split_frames,
    token_frame,
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


class CollectionEntry:
    """What the gateway keeps of one collection: spec, oracle, decoder and the canonical
    binary layout of its messages (:class:`~ldpcore.message.MessageLayout`)."""

    __slots__ = ("spec", "oracle", "decoder", "layout", "cid", "fingerprint", "row_bytes")

    def __init__(self, spec: CollectionSpec) -> None:
        self.spec = spec
        self.cid = spec.id
        self.fingerprint = spec.fingerprint
        self.oracle: Mechanism = spec.oracle()
        self.decoder = MessageDecoder(spec, self.oracle)
        self.layout: MessageLayout = self.decoder.layout
        self.row_bytes = self.layout.row_bytes

    def validate_many(self, values: Sequence[bytes]
                      ) -> tuple[Reports, list[tuple[int, ReportError]]]:
        """All reports of canonically framed ``values`` (one vectorised check), and the
        (position, error) of any bad one."""
        return self.decoder.decode_many(values)

    def encode(self, reports: Reports) -> bytes:
        """One binary message of this collection holding ``reports``."""
        return encode_message(self.spec, reports)


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
        split = _token_frame_messages if self.token_frames else split_frames
        for i, f in enumerate(split(self.frames)):
            try:
                self.entry.decoder.decode(f)
            except ReportError as exc:
                return i, exc
        return None


def _report_error(exc: ReportError, index: int) -> BodyError:
    return BodyError(400, exc.reason, str(exc), exc.index if isinstance(exc, FrameError)
                     else index)


def _binary(data: bytes, index: int, cat: Catalogue) -> Message:
    if not data:
        raise BodyError(400, "truncated", "the message is empty", index)
    if data[:4] == MESSAGE_MAGIC and len(data) >= 6:
        entry = cat.by_bytes.get(data[6:6 + data[5]])
        if entry is not None:
            n = entry.layout.framed_count(data)
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


def _merged(entry: CollectionEntry, rows: np.ndarray, start: int, body: bytes,
            tokens: list[bytes] | None = None) -> Message | None:
    """The frames of ``body`` as rows of one byte array, each a canonical message of
    ``entry`` from column ``start`` after the same u32 length: one canonical message of
    all their reports."""
    split = entry.layout.uniform_columns(rows, start, 4)
    if split is None:
        return None
    k, (n, blocks) = len(rows), split
    raw = entry.layout.encode(k * n, [b.tobytes() for b in blocks])
    return Message(entry, raw, None, k * n, k, body, tokens, tokens is not None)


def _uniform_frames(body: bytes, cat: Catalogue) -> Message | None:
    """A frames body of k ≥ :data:`~ldpcore.message.UNIFORM_MIN` frames of one length, all
    canonical messages of one collection with the same header and report count, as *one*
    canonical message of all their reports (numpy slicing, no per-frame Python); None if
    it is not that."""
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
    return _merged(entry, np.frombuffer(body, dtype=np.uint8).reshape(size // step, step), 4,
                   body)


def _json_message(obj: Any, index: int, cat: Catalogue) -> Message:
    try:
        cid, fp = json_envelope(obj)
        check_json_keys(obj, ("tokens",))
        entry = cat.by_id.get(cid)
        if entry is None:
            raise UnknownCollection(cid, index)
        check_envelope(entry.spec, cid, fp)
        reports = json_reports(entry.oracle, obj["reports"])
    except ReportError as exc:
        raise _report_error(exc, index) from None
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
    """A token frames body of k ≥ :data:`~ldpcore.message.UNIFORM_MIN` frames of one
    layout — each ``c`` tokens of type 2 and a canonical message of ``c`` reports of one
    collection, all with the same header — as *one* canonical message of all their
    reports and the list of all their tokens (numpy slicing, no per-frame Python); None if
    it is not that.

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
    if entry is None or entry.layout.framed_count(first) != count:
        return None
    k = size // step
    arr = np.frombuffer(body, dtype=np.uint8).reshape(k, step)
    # every frame: the same token count (the message length: _merged); every token of type
    # 0x0002 (the others are refused one by one by the gate: take the slow path)
    toks = arr[:, 2:at].reshape(k * count, TOKEN_LEN)
    if not (arr[:, :2] == arr[0, :2]).all() or toks[:, 0].any() or not (toks[:, 1] == 2).all():
        return None
    blob = toks.tobytes()
    return _merged(entry, arr, at + 4, body,
                   [blob[i:i + TOKEN_LEN] for i in range(0, len(blob), TOKEN_LEN)])


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
    try:  # an array of messages: one level above the message format's depth
        doc = load_json(body, max_depth=MAX_JSON_DEPTH + 1, max_bytes=None,
                        what=" (an array of messages)")
    except ReportError as exc:
        raise _report_error(exc, 0) from None
    if isinstance(doc, dict):
        return [_json_message(doc, 0, cat)]
    if isinstance(doc, list):
        if not doc:
            raise BodyError(400, "schema", "the JSON array holds no message", 0)
        return [_json_message(obj, i, cat) for i, obj in enumerate(doc)]
    raise BodyError(400, "schema", "the body must be a JSON message object or an array of "
                    f"them, got {type(doc).__name__}", 0)


def _octets(body: bytes, cat: Catalogue, authorization: bytes | None) -> list[Message]:
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


def _frames(body: bytes, cat: Catalogue) -> list[Message]:
    merged = _uniform_frames(body, cat)
    if merged is not None:
        return [merged]
    try:
        frames = split_frames(body)
    except FrameError as exc:
        raise _report_error(exc, exc.index) from None
    if not frames:
        raise BodyError(400, "truncated", "the body holds no frame", 0)
    return [_binary(f, i, cat) for i, f in enumerate(frames)]


def parse_body(mtype: str | None, body: bytes, cat: Catalogue,
               authorization: bytes | None = None) -> list[Message]:
    """The messages of a request body of media type ``mtype`` (see the module docstring);
    ``authorization``: the request's Authorization header (a ``PrivateToken`` token rides
    with an octet-stream message).

    Raises :class:`BodyError` (400 with the message's ``ReportError.reason``, or 415) or
    :class:`UnknownCollection`; never anything else.
    """
    if mtype == OCTETS:
        return _octets(body, cat, authorization)
    if mtype == TOKEN_FRAMES:
        return _token_frames(body, cat)
    if mtype == FRAMES:
        return _frames(body, cat)
    if mtype == JSON:
        return _json_body(body, cat)
    raise BodyError(415, "media_type", f"Content-Type must be one of {', '.join(MEDIA_TYPES)}"
                    f", got {mtype!r}")
