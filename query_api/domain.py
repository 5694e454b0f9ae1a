"""Between a collection's domain and the query string: labels, parsed values, indices."""

from __future__ import annotations

import math
import re
import time
from datetime import UTC, datetime
from typing import Any

from ldpcore import ParameterError
from ldpcore.collection import CollectionSpec

from .errors import QueryError

__all__ = ["labels_of", "to_index", "index_value", "index_offset", "parse_time",
           "check_window", "TIME_PATTERN"]


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_RELATIVE = re.compile(r"^-(\d+(?:\.\d+)?)([smhdw])$")
TIME_PATTERN = (r"^(now|-\d+(\.\d+)?[smhdw]|-?\d+(\.\d+)?|"
                r"\d{4}-\d{2}-\d{2}([T ][0-9:.]+)?(Z|[+-]\d{2}:?\d{2})?)$")
"""What ``since``/``until`` accept (the OpenAPI pattern of both)."""


def parse_time(raw: str | None, name: str, now: float | None = None) -> float | None:
    """Epoch seconds, ISO 8601 (``2026-11-22T10:00:00Z``), ``now`` or a time relative to
    now (``-90s``, ``-15m``, ``-1h``, ``-7d``, ``-2w``); None when absent.

    >>> parse_time("-1h", "since", now=7200.0), parse_time("now", "until", now=5.0)
    (3600.0, 5.0)
    """
    if raw is None or raw == "":
        return None
    now = time.time() if now is None else now
    if raw == "now":
        return now
    rel = _RELATIVE.match(raw)
    if rel:
        return now - float(rel.group(1)) * _UNITS[rel.group(2)]
    try:
        value = float(raw)
    except ValueError:
        try:
            dt = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise QueryError(f"{name} must be epoch seconds, an ISO 8601 time, 'now' or "
                             f"a relative time such as -1h, got {raw!r}",
                             parameter=name) from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        value = dt.timestamp()
    if not math.isfinite(value):
        raise QueryError(f"{name} must be finite, got {raw!r}", parameter=name)
    return value


def index_offset(spec: CollectionSpec) -> int:
    """Value of domain index 0 for integer domains (PEM reports indices)."""
    return int(spec.domain.low) if spec.domain.kind == "integers" else 0


_LABELS: dict[str, list[str] | None] = {}


def labels_of(spec: CollectionSpec) -> list[str] | None:
    """A display label per domain value, or None for huge domains (values speak for
    themselves, e.g. a 2^32 heavy-hitter domain).  Built once per spec: routes call this
    on every request, cache hits included."""
    hit = _LABELS.get(spec.fingerprint, False)
    if hit is not False:
        return hit  # type: ignore[return-value]
    if len(_LABELS) > 1024:
        _LABELS.clear()
    out = _LABELS[spec.fingerprint] = _labels(spec)
    return out


def _labels(spec: CollectionSpec) -> list[str] | None:
    dom = spec.domain
    if dom.size > 1 << 20 or dom.kind == "attributes":  # attributes: per attribute
        return None
    if dom.kind == "categories":
        return list(dom.labels)
    if dom.kind == "integers":
        return [str(int(dom.low) + i) for i in range(dom.size)]
    width = (dom.high - dom.low) / dom.bins
    return [f"[{dom.low + i * width:g}, {dom.low + (i + 1) * width:g})" for i in range(dom.bins)]


def to_index(spec: CollectionSpec, raw: str, name: str) -> int:
    """A domain value (label, integer or number) given as a query parameter → index."""
    dom = spec.domain
    try:
        if dom.kind == "categories":
            if raw in dom.labels:
                return dom.labels.index(raw)
            raise ParameterError(f"not one of the labels {list(dom.labels)[:20]}")
        return int(dom.index([float(raw)])[0])
    except (ParameterError, ValueError) as exc:
        allowed = ("a label of the collection" if dom.kind == "categories" else
                   f"a number in [{dom.low:g}, {dom.high:g}]")
        raise QueryError(f"{name} must be {allowed}, got {raw!r} ({exc})",
                         parameter=name) from None


def index_value(spec: CollectionSpec, idx: int) -> Any:
    """The domain value of an index (the lower edge of a bin for intervals)."""
    dom = spec.domain
    if dom.kind == "categories":
        return dom.labels[idx]
    if dom.kind == "integers":
        return int(dom.low) + idx
    return dom.low + idx * (dom.high - dom.low) / dom.bins


def check_window(spec: CollectionSpec, since: float | None, until: float | None,
                 now: float | None = None) -> None:
    """Refuse a window that is empty by construction (400), rather than answering 409 "not
    enough reports yet": since after until, or wholly outside [now − retention, now]."""
    now = time.time() if now is None else now
    if since is not None and until is not None and since >= until:
        raise QueryError(f"since must be before until (since={since:g}, until={until:g})",
                         parameter="since")
    oldest = now - spec.retention_seconds - spec.window_seconds
    if until is not None and until <= oldest:
        raise QueryError(f"until is older than the collection's retention "
                         f"({spec.retention_seconds} s): no window can hold data",
                         parameter="until")
    if since is not None and since > now + 60:
        raise QueryError("since is in the future: no window can hold data yet",
                         parameter="since")
