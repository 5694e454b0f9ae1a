"""Between a collection's domain and the query string: labels, parsed values, indices."""

from __future__ import annotations

import calendar
import math
import re
import time
from typing import Any

from ldpcore import ParameterError
from ldpcore.collection import CollectionSpec

from .errors import QueryError

__all__ = ["labels_of", "to_index", "index_value", "index_offset", "parse_time",
           "TIME_PATTERN"]


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_RELATIVE = re.compile(r"^-(\d{1,9}(?:\.\d{1,9})?)([smhdw])$")
_ISO = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
                  r"(?:[T ]([01]\d|2[0-3])(?::([0-5]\d)(?::([0-5]\d)(\.\d{1,9})?)?)?"
                  r"(Z|[+-](?:[01]\d|2[0-3]):?[0-5]\d)?)?$")
TIME_PATTERN = (r"^(now|-\d{1,9}(\.\d{1,9})?[smhdw]|-?\d{1,11}(\.\d{1,9})?|"
                r"[1-9]\d{3}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
                r"([T ]([01]\d|2[0-3])(:[0-5]\d(:[0-5]\d(\.\d{1,9})?)?)?"
                r"(Z|[+-]([01]\d|2[0-3]):?[0-5]\d)?)?)$")
"""What ``since``/``until`` accept (the OpenAPI pattern of both): ``now``, a time relative
to now, epoch seconds (up to 11 digits), or an ISO 8601 date or date-time (year 1000 on)
with an optional UTC offset.  Every string it matches is a time."""


def parse_time(raw: str | None, name: str, now: float | None = None) -> float | None:
    """Epoch seconds, ISO 8601 (``2026-11-22T10:00:00Z``), ``now`` or a time relative to
    now (``-90s``, ``-15m``, ``-1h``, ``-7d``, ``-2w``); None when absent.

    A day past the end of its month rolls over, as in C's ``timegm`` (``2026-02-30`` is
    2 March): every string :data:`TIME_PATTERN` matches is a time.

    >>> parse_time("-1h", "since", now=7200.0), parse_time("now", "until", now=5.0)
    (3600.0, 5.0)
    >>> parse_time("1970-01-02T00:00:01+01:00", "since"), parse_time("1970-02-30", "until")
    (82801.0, 5184000.0)
    """
    if raw is None or raw == "":
        return None
    now = time.time() if now is None else now
    if raw == "now":
        return now
    rel = _RELATIVE.match(raw)
    if rel:
        return now - float(rel.group(1)) * _UNITS[rel.group(2)]
    iso = _ISO.match(raw)
    if iso:
        return _iso_seconds(iso)
    try:
        value = float(raw)
    except ValueError:
        raise QueryError(f"{name} must be epoch seconds, an ISO 8601 time, 'now' or "
                         f"a relative time such as -1h, got {raw!r}", parameter=name) from None
    if not math.isfinite(value):
        raise QueryError(f"{name} must be finite, got {raw!r}", parameter=name)
    return value


def _iso_seconds(m: re.Match[str]) -> float:
    year, month, day, hour, minute, second, frac, tz = m.groups()
    secs = calendar.timegm((int(year), int(month), int(day), int(hour or 0), int(minute or 0),
                            int(second or 0)))
    offset = 0
    if tz and tz != "Z":
        digits = tz[1:].replace(":", "")
        offset = (int(digits[:2]) * 3600 + int(digits[2:]) * 60) * (1 if tz[0] == "+" else -1)
    return float(secs - offset) + (float(frac) if frac else 0.0)


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
    return dom.value_labels()


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
