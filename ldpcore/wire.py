"""Wire format of report batches.

Binary (``encode``/``decode``), version 1, little-endian, columnar::

    magic  b"LDPR"        4 bytes
    version               u8   (= 1)
    mechanism             u8 length + ASCII
    fingerprint           16 ASCII hex digits
    n                     u32  number of reports
    ncols                 u8
    per column:           u8 name length + ASCII name, u8 dtype code, u16 bytes per report
    per column, in order: n * bytes-per-report raw data

JSON records (``to_records``/``from_records``) give one dict per report for
devices written in other languages: ``{"mechanism", "fingerprint", <column>:
int}``; a bitmask column is the sorted list of the indices of its 1 bits.

Decoding validates everything (framing, mechanism, fingerprint, columns,
dtypes, ranges) and raises :class:`~ldpcore.errors.ReportError`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import Mechanism, Reports
from .errors import ReportError

__all__ = ["encode", "decode", "peek", "Header", "to_records", "from_records", "WIRE_VERSION",
           "count_offset"]

WIRE_VERSION = 1
_MAGIC = b"LDPR"
_DTYPES = ["uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"]
_MAX_N = 2**32 - 1


@dataclass(frozen=True)
class Header:
    """What :func:`peek` reads without an oracle: enough to route a batch."""

    mechanism: str
    fingerprint: str
    n: int


def encode(reports: Reports) -> bytes:
    """Encode a batch into the versioned columnar binary format."""
    n = len(reports)
    if n > _MAX_N:
        raise ReportError(f"a batch holds at most {_MAX_N} reports, got {n}",
                          reason="too_large")
    mech = reports.mechanism.encode("ascii")
    out = [_MAGIC, struct.pack("<B", WIRE_VERSION), struct.pack("<B", len(mech)), mech,
           reports.fingerprint.encode("ascii"), struct.pack("<IB", n, len(reports.columns))]
    bodies = []
    for name, col in reports.columns.items():
        arr = np.ascontiguousarray(col)
        dt = arr.dtype.newbyteorder("<").name if arr.dtype.byteorder == ">" else arr.dtype.name
        if dt not in _DTYPES:
            raise ReportError(f"column {name!r} has unsupported dtype {arr.dtype}",
                              reason="shape")
        per = arr.dtype.itemsize * (int(np.prod(arr.shape[1:])) if arr.ndim > 1 else 1)
        nm = name.encode("ascii")
        out.append(struct.pack("<B", len(nm)) + nm + struct.pack("<BH", _DTYPES.index(dt), per))
        bodies.append(arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes())
    return b"".join(out + bodies)


def count_offset(data: bytes) -> int:
    """Offset of the u32 report count in an encoded batch (after magic, version,
    mechanism and fingerprint); the bytes before it are the same for every batch of
    one oracle."""
    return 6 + data[5] + 16


def _read_header(data: bytes) -> tuple[Header, int]:
    if data[:4] != _MAGIC:
        if len(data) < 4 and _MAGIC.startswith(data):
            raise ReportError("batch truncated in its magic", reason="truncated")
        raise ReportError("not a ldpcore report batch (bad magic)", reason="garbage")
    if len(data) < 6:
        raise ReportError("batch truncated in header", reason="truncated")
    if data[4] != WIRE_VERSION:
        raise ReportError(f"unsupported wire version {data[4]} (supported: {WIRE_VERSION})",
                          reason="version")
    ml = data[5]
    off = 6 + ml + 16
    if len(data) < off + 4:
        raise ReportError("batch truncated in header", reason="truncated")
    try:
        mech = data[6:6 + ml].decode("ascii")
        fp = data[6 + ml:off].decode("ascii")
    except UnicodeDecodeError as exc:
        raise ReportError(f"batch header is not ASCII: {exc}", reason="garbage") from None
    (n,) = struct.unpack_from("<I", data, off)
    return Header(mech, fp, n), off + 4


def peek(data: bytes) -> Header:
    """Read mechanism, fingerprint and n of an encoded batch without decoding it."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ReportError(f"expected bytes, got {type(data).__name__}", reason="garbage")
    return _read_header(bytes(data))[0]


def decode(oracle: Mechanism, data: bytes) -> Reports:
    """Decode and fully validate a batch for ``oracle``; raises ReportError."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ReportError(f"expected bytes, got {type(data).__name__}", reason="garbage")
    data = bytes(data)
    head, off = _read_header(data)
    # the batch header carries its oracle's fingerprint (the envelope the collection's)
    oracle.check_origin(head.mechanism, head.fingerprint, what="batch")
    layout = oracle.report_columns
    try:
        (ncols,) = struct.unpack_from("<B", data, off)
        off += 1
        if ncols != len(layout):
            raise ReportError(f"batch has {ncols} columns, expected {len(layout)}",
                              reason="shape")
        metas = []
        for _ in range(ncols):
            (nl,) = struct.unpack_from("<B", data, off)
            code, per = struct.unpack_from("<BH", data, off + 1 + nl)
            name = data[off + 1:off + 1 + nl].decode("ascii")
            off += 1 + nl + 3
            metas.append((name, code, per))
    except struct.error as exc:
        raise ReportError(f"batch truncated in column table: {exc}",
                          reason="truncated") from None
    except UnicodeDecodeError as exc:
        raise ReportError(f"column name is not ASCII: {exc}", reason="garbage") from None
    cols: dict[str, np.ndarray] = {}
    for (name, code, per), spec in zip(metas, layout, strict=True):
        if name != spec.name:
            raise ReportError(f"column {name!r} where {spec.name!r} was expected",
                              reason="shape")
        if code >= len(_DTYPES) or _DTYPES[code] != spec.dtype:
            got = _DTYPES[code] if code < len(_DTYPES) else f"code {code}"
            raise ReportError(f"column {name!r} has dtype {got}, expected {spec.dtype}",
                              reason="shape")
        item = np.dtype(spec.dtype).itemsize
        want = item * (spec.width if spec.bits else 1)
        if per != want:
            raise ReportError(f"column {name!r} has {per} bytes per report, expected {want}",
                              reason="shape")
        size = head.n * per
        if off + size > len(data):
            raise ReportError(f"batch truncated: column {name!r} needs {size} bytes, "
                              f"{len(data) - off} left", reason="truncated")
        arr = np.frombuffer(data, dtype=np.dtype(spec.dtype).newbyteorder("<"),
                            count=head.n * (per // item), offset=off)
        off += size
        arr = arr.astype(spec.dtype)
        cols[name] = arr.reshape(head.n, spec.width) if spec.bits else arr
    if off != len(data):
        raise ReportError(f"batch has {len(data) - off} trailing bytes", reason="truncated")
    return oracle.validate(Reports(head.mechanism, head.fingerprint, cols))


def to_records(reports: Reports) -> list[dict[str, Any]]:
    """One JSON-able dict per report (bitmask columns as sorted lists of set-bit indices)."""
    n = len(reports)
    per_col: dict[str, list[Any]] = {}
    for name, col in reports.columns.items():
        if col.ndim == 2:
            bits = np.unpackbits(col, axis=1, bitorder="little")
            per_col[name] = [np.flatnonzero(bits[i]).tolist() for i in range(n)]
        else:
            per_col[name] = col.tolist()
    return [{"mechanism": reports.mechanism, "fingerprint": reports.fingerprint,
             **{k: v[i] for k, v in per_col.items()}} for i in range(n)]


def from_records(oracle: Mechanism, records: list[dict[str, Any]]) -> Reports:
    """Inverse of :func:`to_records`, validating every record; raises ReportError."""
    if not isinstance(records, list):
        raise ReportError(f"records must be a list of dicts, got {type(records).__name__}",
                          reason="schema")
    layout = oracle.report_columns
    expected = {"mechanism", "fingerprint", *(c.name for c in layout)}
    cols: dict[str, list[Any]] = {c.name: [] for c in layout}
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise ReportError(f"record {i} is not an object", reason="schema")
        if set(rec) != expected:
            raise ReportError(f"record {i} has keys {sorted(rec)}, expected {sorted(expected)}",
                              reason="schema")
        if not isinstance(rec["mechanism"], str) or not isinstance(rec["fingerprint"], str):
            raise ReportError(f"record {i} needs string 'mechanism' and 'fingerprint'",
                              reason="schema")
        oracle.check_origin(rec["mechanism"], rec["fingerprint"], what=f"record {i}")
        for c in layout:
            v = rec[c.name]
            if c.bits:
                if not isinstance(v, list) or not all(
                        isinstance(b, int) and not isinstance(b, bool) for b in v):
                    raise ReportError(f"record {i} column {c.name!r} must be a list of bit "
                                      "indices", reason="schema")
                if any(b < 0 or b >= c.bits for b in v) or len(set(v)) != len(v):
                    raise ReportError(f"record {i} column {c.name!r} must hold distinct bit "
                                      f"indices in [0, {c.bits})", reason="out_of_range")
                row = np.zeros(c.width * 8, dtype=np.uint8)
                row[v] = 1
                cols[c.name].append(np.packbits(row, bitorder="little"))
            else:
                if not isinstance(v, int) or isinstance(v, bool):
                    raise ReportError(f"record {i} column {c.name!r} must be an integer, got "
                                      f"{type(v).__name__}", reason="schema")
                if not c.low <= v <= c.high:
                    raise ReportError(f"record {i} column {c.name!r} must be an integer in "
                                      f"[{c.low}, {c.high}], got {v!r}",
                                      reason="out_of_range")
                cols[c.name].append(v)
    n = len(records)
    arrays: dict[str, np.ndarray] = {}
    for c in layout:
        if c.bits:
            arrays[c.name] = (np.stack(cols[c.name]) if n
                              else np.zeros((0, c.width), dtype=np.uint8))
        else:
            arrays[c.name] = np.asarray(cols[c.name], dtype=c.dtype)
    return oracle.validate(Reports(oracle.mechanism, oracle.fingerprint, arrays))
