"""Collections: immutable, versioned specs of what devices report, and the Kafka message format.

A collection is an id plus an oracle spec (mechanism, ε, parameters), a domain
(category labels, an integer range or a numeric interval cut into bins), a
tumbling time-window length, a retention and the minimum number of reports before
estimates are served, plus its longitudinal policy (:mod:`ldpcore.longitudinal`):
``reports_per_window`` (the cadence: at most that many reports per device per
window, default 1), ``memoization`` (``"none"``, ``"permanent"`` — the default —
or ``"two-level"``) and, for two-level, ``epsilon_1`` (the instantaneous
channel's ε; the oracle's ε is the permanent ε∞).  Defaults are left out of the
canonical form, so older specs keep their fingerprint.  Its
:attr:`CollectionSpec.fingerprint` (SHA-256 prefix of the canonical spec) travels
in every message, so a device holding a stale or different spec is rejected
instead of silently mixing incompatible reports.

The Kafka message format lives in :mod:`ldpcore.message` (re-exported here).

Pure: no I/O.

>>> spec = CollectionSpec.from_dict({"id": "os", "oracle": {"mechanism": "grr", "epsilon": 1.0},
...                                  "domain": {"kind": "categories",
...                                             "labels": ["linux", "mac", "win"]}})
>>> spec.domain.size, spec.oracle_spec["domain_size"], spec.domain.index(["win", "linux"]).tolist()
(3, 3, [2, 0])
>>> o = spec.oracle()
>>> msg = encode_message(spec, o.perturb([0, 1, 2], rng=1))
>>> cid, reports = decode_message(spec, o, msg)
>>> cid, len(reports)
('os', 3)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from . import longitudinal
from .base import Mechanism, canonical_json, spec_fingerprint
from .errors import ParameterError
from .longitudinal import DEFAULT_POLICY, POLICIES, TwoLevel
from .message import (
    MESSAGE_MAGIC,
    decode_message,
    encode_message,
    message_prefix,
    peek_message,
)
from .registry import make_oracle

__all__ = [
    "Domain",
    "CollectionSpec",
    "encode_message",
    "decode_message",
    "peek_message",
    "message_prefix",
    "window_start",
    "MESSAGE_MAGIC",
    "load_collections",
]

_LENGTH_REQUIRED = (
    "oracle.length is required for a set-valued ps/psi collection: the padding length l. "
    "A device reports one item sampled from its set padded to l, so an item in a set of "
    "more than l items counts only l/|set| (sets of at most l items are counted exactly). "
    "Choose l as LDPMiner and Wang et al. (S&P 2018) do: about the 90th percentile of the "
    "set sizes (a setsize collection, or an svim group's sizes phase, measures them); "
    "length: 1 estimates each device's items at 1/|set| each")
"""Why a set-valued collection outside a protocol group must declare its padding length."""

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_KINDS = ("categories", "integers", "interval", "attributes")
_ATTRIBUTE_KINDS = ("categories", "integers", "interval")
_MAX_RADIX = 1 << 62  # ldpcore.multi: the mixed-radix index of a value tuple
MAX_REPORTS_PER_WINDOW = 1_000_000
_MAX_INT = 2**53 - 1  # exact in every JSON reader


def _finite(x: Any) -> float | None:
    """``float(x)`` for a finite int or float (not bool), else None (huge ints included)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    try:
        out = float(x)
    except OverflowError:
        return None
    return out if math.isfinite(out) else None


@dataclass(frozen=True)
class Domain:
    """The value domain of a collection, mapped onto ``[0, size)``.

    * ``categories``: ``labels`` (distinct strings), index = position;
    * ``integers``: ``low..high`` inclusive, index = value - low;
    * ``interval``: ``[low, high]`` cut into ``bins`` equal bins, index = bin
      (values outside are clipped to the first/last bin);
    * ``attributes``: several named attributes, each a domain of the kinds above
      (``{"kind": "attributes", "attributes": [{"name": "os", "kind": "categories",
      ...}, ...]}``); a value is one device's tuple (a mapping name → value, or a
      sequence in declaration order), index = the mixed-radix index of the
      attributes' indices (attribute 0 most significant; :mod:`ldpcore.multi`), so
      the product of their sizes must be at most 2^62.  Used with mechanism ``multi``.
    """

    kind: str
    labels: tuple[str, ...] = ()
    low: float = 0
    high: float = 0
    bins: int = 0
    attributes: tuple[tuple[str, Domain], ...] = ()

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Domain:
        if not isinstance(raw, Mapping):
            raise ParameterError(f"domain must be an object, got {type(raw).__name__}")
        kind = raw.get("kind")
        if kind not in _KINDS:
            raise ParameterError(f"domain.kind must be one of {list(_KINDS)}, got {kind!r}")
        allowed = {"categories": {"kind", "labels"}, "integers": {"kind", "low", "high"},
                   "interval": {"kind", "low", "high", "bins"},
                   "attributes": {"kind", "attributes"}}[kind]
        extra = sorted(set(raw) - allowed)
        if extra:
            raise ParameterError(f"unknown domain key(s) {extra} for kind {kind!r}")
        if kind == "attributes":
            return cls._attributes_from_dict(raw.get("attributes"))
        if kind == "categories":
            labels = raw.get("labels")
            if (not isinstance(labels, list) or len(labels) < 2
                    or not all(isinstance(x, str) for x in labels)):
                raise ParameterError("domain.labels must be a list of at least 2 strings")
            if len(set(labels)) != len(labels):
                raise ParameterError("domain.labels must be distinct")
            return cls(kind, labels=tuple(labels))
        low, high = raw.get("low"), raw.get("high")
        if kind == "integers":
            if not all(isinstance(x, int) and not isinstance(x, bool) for x in (low, high)):
                raise ParameterError("domain.low and domain.high must be integers")
            assert isinstance(low, int) and isinstance(high, int)
            if high <= low or high - low + 1 > 2**62:
                raise ParameterError(f"domain needs low < high and at most 2^62 values, "
                                     f"got [{low}, {high}]")
            return cls(kind, low=low, high=high)
        bins = raw.get("bins")
        flo, fhi = _finite(low), _finite(high)
        if flo is None or fhi is None or max(abs(flo), abs(fhi)) > 1e300:
            raise ParameterError("domain.low and domain.high must be finite numbers in "
                                 "[-1e300, 1e300]")
        assert isinstance(low, (int, float)) and isinstance(high, (int, float))
        if not high > low:
            raise ParameterError(f"domain needs low < high, got [{low}, {high}]")
        if not isinstance(bins, int) or isinstance(bins, bool) or not 2 <= bins <= 2**31 - 1:
            raise ParameterError(f"domain.bins must be an integer >= 2, got {bins!r}")
        return cls(kind, low=float(low), high=float(high), bins=bins)

    @classmethod
    def _attributes_from_dict(cls, raw: Any) -> Domain:
        from .multi.attributes import ATTRIBUTE_NAME_RE, MAX_ATTRIBUTES

        if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_ATTRIBUTES:
            raise ParameterError(f"domain.attributes must be a list of 1 to {MAX_ATTRIBUTES} "
                                 "objects {name, kind, ...}")
        out: list[tuple[str, Domain]] = []
        for i, a in enumerate(raw):
            if not isinstance(a, Mapping):
                raise ParameterError(f"domain.attributes[{i}] must be an object "
                                     "{name, kind, ...}")
            name = a.get("name")
            if not isinstance(name, str) or not ATTRIBUTE_NAME_RE.match(name):
                raise ParameterError(f"domain.attributes[{i}].name must match "
                                     f"{ATTRIBUTE_NAME_RE.pattern}, got {name!r}")
            if a.get("kind") not in _ATTRIBUTE_KINDS:
                raise ParameterError(f"domain.attributes[{i}] ({name}).kind must be one of "
                                     f"{list(_ATTRIBUTE_KINDS)}, got {a.get('kind')!r}")
            try:
                sub = cls.from_dict({k: v for k, v in a.items() if k != "name"})
            except ParameterError as exc:
                raise ParameterError(f"domain.attributes[{i}] ({name}): {exc}") from None
            out.append((name, sub))
        names = [n for n, _ in out]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ParameterError(f"domain.attributes names must be distinct, repeated: {dup}")
        product = math.prod(d.size for _, d in out)
        if product > _MAX_RADIX:
            raise ParameterError(f"domain.attributes: the attributes' sizes multiply to "
                                 f"{product} > 2^62 (a device's tuple must fit one index); "
                                 "use fewer values or bins")
        if product < 2:
            raise ParameterError("domain.attributes must have at least 2 value tuples")
        return cls("attributes", attributes=tuple(out))

    def attribute(self, name: str) -> Domain:
        """The domain of attribute ``name`` (kind ``attributes``)."""
        for n, d in self.attributes:
            if n == name:
                return d
        raise ParameterError(f"unknown attribute {name!r}; attributes: "
                             f"{[n for n, _ in self.attributes]}")

    def value_labels(self) -> list[str]:
        """The label of every index: the category, the integer, or the bin ``[lo, hi)``.

        >>> Domain("interval", low=0.0, high=1.0, bins=2).value_labels()
        ['[0, 0.5)', '[0.5, 1)']
        """
        if self.kind == "attributes":
            raise ParameterError("an attributes domain has labels per attribute")
        if self.kind == "categories":
            return list(self.labels)
        if self.kind == "integers":
            return [str(int(self.low) + i) for i in range(self.size)]
        w = (self.high - self.low) / self.bins
        return [f"[{self.low + i * w:g}, {self.low + (i + 1) * w:g})" for i in range(self.bins)]

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "attributes":
            return {"kind": self.kind,
                    "attributes": [{"name": n, **d.to_dict()} for n, d in self.attributes]}
        if self.kind == "categories":
            return {"kind": self.kind, "labels": list(self.labels)}
        if self.kind == "integers":
            return {"kind": self.kind, "low": int(self.low), "high": int(self.high)}
        return {"kind": self.kind, "low": self.low, "high": self.high, "bins": self.bins}

    @property
    def size(self) -> int:
        if self.kind == "attributes":
            return math.prod(d.size for _, d in self.attributes)
        if self.kind == "categories":
            return len(self.labels)
        if self.kind == "integers":
            return int(self.high - self.low) + 1
        return self.bins

    def index(self, values: Any) -> npt.NDArray[np.int64]:
        """Map labels / numbers to indices in ``[0, size)``; raises ParameterError if outside.

        For ``attributes``: ``values`` is a list of device tuples (mappings name → value
        or sequences in declaration order); the result is their mixed-radix indices.
        """
        if self.kind == "attributes":
            return self._index_tuples(values)
        arr = np.atleast_1d(np.asarray(values, dtype=object if self.kind == "categories"
                                       else np.float64))
        if self.kind == "categories":
            pos = {label: i for i, label in enumerate(self.labels)}
            try:
                return np.fromiter((pos[v] for v in arr), dtype=np.int64, count=arr.size)
            except (KeyError, TypeError):
                bad = next(v for v in arr if not isinstance(v, str) or v not in pos)
                raise ParameterError(f"value {bad!r} is not one of the domain's labels") from None
        if not np.all(np.isfinite(arr)):
            raise ParameterError("values must be finite numbers")
        if self.kind == "integers":
            if np.any(arr != np.round(arr)) or np.any(arr < self.low) or np.any(arr > self.high):
                raise ParameterError(f"values must be integers in [{int(self.low)}, "
                                     f"{int(self.high)}]")
            return (arr - self.low).astype(np.int64)
        width = (self.high - self.low) / self.bins
        return np.clip(np.floor((arr - self.low) / width), 0, self.bins - 1).astype(np.int64)

    def attribute_indices(self, values: Any) -> npt.NDArray[np.int64]:
        """Device tuples → an (n, m) array of per-attribute indices (kind ``attributes``).

        >>> dom = Domain.from_dict({"kind": "attributes", "attributes": [
        ...     {"name": "os", "kind": "categories", "labels": ["linux", "mac", "win"]},
        ...     {"name": "age", "kind": "interval", "low": 0, "high": 100, "bins": 10}]})
        >>> dom.attribute_indices([{"os": "mac", "age": 37.5}, ("win", 99)]).tolist()
        [[1, 3], [2, 9]]
        >>> dom.index([{"os": "mac", "age": 37.5}]).tolist()   # 1 * 10 + 3
        [13]
        """
        if self.kind != "attributes":
            raise ParameterError(f"domain kind {self.kind!r} has no attributes")
        names = [n for n, _ in self.attributes]
        rows = list(values) if not isinstance(values, (Mapping, str, bytes)) else [values]
        cols: list[list[Any]] = [[] for _ in names]
        for r, row in enumerate(rows):
            if isinstance(row, Mapping):
                missing = [n for n in names if n not in row]
                extra = sorted(str(k) for k in row if k not in names)
                if missing or extra:
                    raise ParameterError(f"value {r}: needs exactly the attributes {names}"
                                         + (f", missing {missing}" if missing else "")
                                         + (f", unknown {extra}" if extra else ""))
                items = [row[n] for n in names]
            elif isinstance(row, (list, tuple)) and len(row) == len(names):
                items = list(row)
            else:
                raise ParameterError(f"value {r} must be a mapping {{{', '.join(names)}}} or a "
                                     f"sequence of {len(names)} values, got {row!r}")
            for j, v in enumerate(items):
                cols[j].append(v)
        out = np.zeros((len(rows), len(names)), dtype=np.int64)
        for j, (name, dom) in enumerate(self.attributes):
            if rows:
                try:
                    out[:, j] = dom.index(cols[j])
                except ParameterError as exc:
                    raise ParameterError(f"attribute {name!r}: {exc}") from None
        return out

    def _index_tuples(self, values: Any) -> npt.NDArray[np.int64]:
        idx = self.attribute_indices(values)
        out = np.zeros(idx.shape[0], dtype=np.int64)
        for j, (_, dom) in enumerate(self.attributes):
            out = out * dom.size + idx[:, j]
        return out


@dataclass(frozen=True)
class CollectionSpec:
    """An immutable, versioned collection spec (see the module docstring).

    ``oracle_spec`` is the full ldpcore spec (``make_oracle(**oracle_spec)``), with
    ``domain_size`` filled in from the domain.  To change anything, register a new
    id (e.g. ``"app-version.v2"``) or bump ``version``: the fingerprint changes.
    """

    id: str
    oracle_spec: Mapping[str, Any]
    domain: Domain
    description: str = ""
    version: int = 1
    window_seconds: int = 3600
    retention_seconds: int = 30 * 86400
    min_reports: int = 100
    memoization: str = DEFAULT_POLICY
    epsilon_1: float | None = None
    reports_per_window: int = 1
    protocol: Mapping[str, Any] | None = None
    """Multi-phase protocol of a set-valued phase collection (:mod:`ldpcore.setvalued.phases`)."""
    quota: int | None = None
    """``quota: {reports_per_window: k}``: tokens a device may redeem per window at a gateway
    with Privacy Pass tokens on (None: the cadence ``reports_per_window``).  An admission
    rule, not part of what a report means: outside the fingerprint, kept by :meth:`to_json`."""
    _fingerprint: str = field(default="", compare=False, repr=False)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CollectionSpec:
        """Validate and build a spec from its JSON/YAML form.

        Any malformed input raises :class:`ParameterError` (naming the key and the
        allowed values), never another exception.
        """
        try:
            return cls._from_dict(raw)
        except ParameterError:
            raise
        except (TypeError, ValueError, ArithmeticError, KeyError, AttributeError,
                RecursionError) as exc:
            raise ParameterError(f"invalid collection spec: {type(exc).__name__}: {exc}") from None

    @classmethod
    def _from_dict(cls, raw: Mapping[str, Any]) -> CollectionSpec:
        if not isinstance(raw, Mapping):
            raise ParameterError(f"a collection must be an object, got {type(raw).__name__}")
        known = {"id", "description", "version", "oracle", "domain", "window_seconds",
                 "retention_seconds", "min_reports", "fingerprint", "memoization",
                 "epsilon_1", "reports_per_window", "protocol", "quota"}
        extra = sorted(set(raw) - known)
        if extra:
            raise ParameterError(f"unknown collection key(s) {extra}; allowed: {sorted(known)}")
        cid = raw.get("id")
        if not isinstance(cid, str) or not _ID_RE.match(cid):
            raise ParameterError(f"collection id must match {_ID_RE.pattern}, got {cid!r}")
        desc = raw.get("description", "")
        if not isinstance(desc, str):
            raise ParameterError("description must be a string")
        domain = Domain.from_dict(raw.get("domain", {}))
        ints = {}
        for key, default, low in (("version", 1, 1), ("window_seconds", 3600, 1),
                                  ("retention_seconds", 30 * 86400, 1), ("min_reports", 100, 0)):
            v = raw.get(key, default)
            if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= _MAX_INT:
                raise ParameterError(f"{key} must be an integer in [{low}, {_MAX_INT}], "
                                     f"got {v!r}")
            ints[key] = v
        oracle_raw = raw.get("oracle")
        if not isinstance(oracle_raw, Mapping) or "mechanism" not in oracle_raw:
            raise ParameterError("oracle must be an object with a 'mechanism'")
        params = dict(oracle_raw)
        bad_keys = [k for k in params if not isinstance(k, str)]
        if bad_keys:
            raise ParameterError(f"oracle parameter names must be strings, got {bad_keys!r}")
        _numeric_params(params, domain)
        _attribute_params(params, domain)
        if params.setdefault("domain_size", domain.size) != domain.size:
            raise ParameterError(f"oracle.domain_size {params['domain_size']} does not match the "
                                 f"domain's {domain.size} values")
        if (params.get("mechanism") in ("ps", "psi") and "length" not in params
                and raw.get("protocol") is None):
            raise ParameterError(_LENGTH_REQUIRED)
        oracle = make_oracle(**params)
        memo, eps1, per_window = _longitudinal(raw, oracle)
        protocol = None
        if raw.get("protocol") is not None:
            from .setvalued.phases import Protocol

            protocol = Protocol.from_dict(raw["protocol"], oracle).to_dict()
        spec = cls(cid, dict(oracle.spec), domain, desc, version=ints["version"],
                   window_seconds=ints["window_seconds"],
                   retention_seconds=ints["retention_seconds"], min_reports=ints["min_reports"],
                   memoization=memo, epsilon_1=eps1, reports_per_window=per_window,
                   protocol=protocol, quota=_quota(raw.get("quota")))
        given = raw.get("fingerprint")
        if given is not None and given != spec.fingerprint:
            raise ParameterError(f"fingerprint {given!r} does not match the spec's "
                                 f"{spec.fingerprint!r}")
        return spec

    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON-able form (the input of the fingerprint, without it).

        The longitudinal keys appear only when they differ from their defaults
        (memoization ``"permanent"``, one report per window), so specs declared
        before they existed keep their fingerprint.
        """
        out: dict[str, Any] = {
            "id": self.id, "description": self.description, "version": self.version,
            "oracle": dict(self.oracle_spec), "domain": self.domain.to_dict(),
            "window_seconds": self.window_seconds,
            "retention_seconds": self.retention_seconds, "min_reports": self.min_reports}
        if self.memoization != DEFAULT_POLICY:
            out["memoization"] = self.memoization
        if self.epsilon_1 is not None:
            out["epsilon_1"] = self.epsilon_1
        if self.reports_per_window != 1:
            out["reports_per_window"] = self.reports_per_window
        if self.protocol is not None:
            out["protocol"] = dict(self.protocol)
        return out

    def to_json(self) -> str:
        """Canonical JSON text of :meth:`to_dict` plus the fingerprint (and the quota, if
        declared: it is outside the fingerprint)."""
        out = {**self.to_dict(), "fingerprint": self.fingerprint}
        if self.quota is not None:
            out["quota"] = {"reports_per_window": self.quota}
        return canonical_json(out)

    @property
    def token_quota(self) -> int:
        """Tokens one device may obtain and redeem per window: the declared quota, else the
        cadence ``reports_per_window`` (1 unless declared), so honest devices are never
        refused."""
        return self.quota if self.quota is not None else self.reports_per_window

    @property
    def fingerprint(self) -> str:
        if not self._fingerprint:
            object.__setattr__(self, "_fingerprint", spec_fingerprint(self.to_dict()))
        return self._fingerprint

    def oracle(self) -> Mechanism:
        """A fresh oracle for this collection (validates and aggregates its reports)."""
        return make_oracle(**self.oracle_spec)

    @property
    def attribute_names(self) -> tuple[str, ...]:
        """The attributes of a ``multi`` collection, then its 2-way marginals ``"a*b"``
        (empty for the others)."""
        pairs = self.oracle_spec.get("pairs") or []
        return (tuple(n for n, _ in self.domain.attributes)
                + tuple("*".join(p["attributes"]) for p in pairs))

    def attribute_spec(self, name: str) -> CollectionSpec:
        """The view of one attribute of a ``multi`` collection as a collection of its own:
        id ``"<id>.<name>"``, the attribute's domain and oracle (at ε/k), this collection's
        windows and policy.  For estimation and labels only: its fingerprint is not the
        one reports carry, and its reports live in the parent's state
        (:meth:`ldpcore.multi.MultiAttribute.attribute_state`).

        >>> spec = CollectionSpec.from_dict({"id": "profile", "oracle": {"mechanism": "multi",
        ...     "epsilon": 2.0}, "domain": {"kind": "attributes", "attributes": [
        ...     {"name": "os", "kind": "categories", "labels": ["linux", "mac", "win"]},
        ...     {"name": "age", "kind": "interval", "low": 0, "high": 100, "bins": 10}]}})
        >>> sub = spec.attribute_spec("age")
        >>> sub.id, sub.oracle_spec["mechanism"], sub.oracle_spec["epsilon"], sub.domain.bins
        ('profile.age', 'pm', 2.0, 10)
        """
        dom = (_pair_domain(self.domain, name) if "*" in name
               else self.domain.attribute(name))
        oracle: Any = self.oracle()
        sub = oracle.attribute(name)
        return CollectionSpec(f"{self.id}.{name}", dict(sub.spec), dom,
                              f"attribute {name!r} of {self.id!r}", version=self.version,
                              window_seconds=self.window_seconds,
                              retention_seconds=self.retention_seconds,
                              min_reports=self.min_reports, memoization=self.memoization,
                              reports_per_window=self.reports_per_window)

    @property
    def set_valued(self) -> bool:
        """True when devices hold a set of the domain's items (mechanisms ps, psi, setsize)."""
        from .setvalued.phases import is_set_valued

        return is_set_valued(self.oracle_spec)

    def index_sets(self, sets: Any) -> Any:
        """Sets of labels/values → a :class:`~ldpcore.setvalued.base.SetBatch` of indices."""
        from .setvalued.phases import index_sets

        return index_sets(self.domain, sets)

    def two_level(self) -> TwoLevel | None:
        """The two-level scheme of a ``memoization: two-level`` collection, else None."""
        if self.memoization != "two-level" or self.epsilon_1 is None:
            return None
        return TwoLevel(self.oracle(), epsilon_1=self.epsilon_1)

    def estimation_oracle(self) -> Mechanism:
        """The oracle whose ``estimate``/``variance`` fit this collection's reports.

        For ``two-level`` the composed channel (:attr:`TwoLevel.composed`: same
        fingerprint and state as :meth:`oracle`, composed probabilities); else
        :meth:`oracle`.  Multi-window variances: :mod:`ldpcore.longitudinal`.
        """
        tl = self.two_level()
        return tl.composed if tl is not None else self.oracle()

    def effective_sample_size(self, window_counts: Sequence[int] | npt.NDArray[Any],
                              frequency: float = 0.0) -> float:
        """n_eff of a state summed over windows with these report counts (this collection's
        memoization and cadence; see :func:`ldpcore.longitudinal.effective_sample_size`).

        >>> spec = CollectionSpec.from_dict({"id": "os", "oracle": {"mechanism": "grr",
        ...     "epsilon": 1.0}, "domain": {"kind": "categories", "labels": ["a", "b"]}})
        >>> spec.effective_sample_size([300, 300, 300])
        300.0
        """
        tl = self.two_level()
        rho = tl.correlation(frequency) if tl is not None else None
        return longitudinal.effective_sample_size(
            window_counts, self.memoization, reports_per_window=self.reports_per_window,
            correlation=rho)

    def multiwindow_variance(self, window_counts: Sequence[int] | npt.NDArray[Any],
                             frequency: float = 0.0) -> float:
        """Variance of one frequency estimate from a state summed over windows with these
        report counts (see :func:`ldpcore.longitudinal.multiwindow_variance`)."""
        tl = self.two_level()
        return longitudinal.multiwindow_variance(
            tl if tl is not None else self.oracle(), window_counts, self.memoization,
            frequency=frequency, reports_per_window=self.reports_per_window)


def _pair_domain(domain: Domain, name: str) -> Domain:
    """The domain of the 2-way marginal ``"a*b"``: categories ``"x & y"`` (index
    i_a·d_b + i_b), or plain integers beyond 65,536 pairs."""
    a, _, b = name.partition("*")
    da, db = domain.attribute(a), domain.attribute(b)
    if da.size * db.size > 1 << 16:
        return Domain("integers", low=0, high=da.size * db.size - 1)
    return Domain("categories", labels=tuple(f"{x} & {y}" for x in da.value_labels()
                                             for y in db.value_labels()))


def _quota(raw: Any) -> int | None:
    """``quota: {reports_per_window: k}`` (k an integer ≥ 1), or None when absent."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or set(raw) != {"reports_per_window"}:
        raise ParameterError("quota must be an object {reports_per_window: k}, got "
                             f"{raw!r}")
    k = raw["reports_per_window"]
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_REPORTS_PER_WINDOW:
        raise ParameterError(f"quota.reports_per_window must be an integer in "
                             f"[1, {MAX_REPORTS_PER_WINDOW}], got {k!r}")
    return k


def _longitudinal(raw: Mapping[str, Any], oracle: Mechanism
                  ) -> tuple[str, float | None, int]:
    """Validate memoization, epsilon_1 and reports_per_window (see ldpcore.longitudinal)."""
    memo = raw.get("memoization", DEFAULT_POLICY)
    if not isinstance(memo, str) or memo not in POLICIES:
        raise ParameterError(f"memoization must be one of {list(POLICIES)}, got {memo!r}")
    per_window = raw.get("reports_per_window", 1)
    if (not isinstance(per_window, int) or isinstance(per_window, bool)
            or not 1 <= per_window <= MAX_REPORTS_PER_WINDOW):
        raise ParameterError(f"reports_per_window must be an integer in "
                             f"[1, {MAX_REPORTS_PER_WINDOW}], got {per_window!r}")
    eps1 = raw.get("epsilon_1")
    if memo != "two-level":
        if eps1 is not None:
            raise ParameterError(f"epsilon_1 is only allowed with memoization 'two-level', "
                                 f"got memoization {memo!r}")
        return memo, None, per_window
    if eps1 is None:
        raise ParameterError("memoization 'two-level' needs epsilon_1 (the instantaneous "
                             "channel's ε, a real number in (0, 100])")
    # Validates epsilon_1 in (0, EPSILON_1_MAX] and refuses mechanisms that do not compose.
    tl = TwoLevel(oracle, epsilon_1=eps1)
    return memo, tl.epsilon_1, per_window


def _numeric_params(params: dict[str, Any], domain: Domain) -> None:
    """Numeric mechanisms (sw, pm, duchi) take the interval from the domain."""
    from .numeric.base import NumericOracle
    from .registry import oracle_class

    cls = oracle_class(params["mechanism"])
    if not (isinstance(cls, type) and issubclass(cls, NumericOracle)):
        return
    if domain.kind != "interval":
        raise ParameterError(f"mechanism {params['mechanism']!r} needs an interval domain "
                             f"(kind: interval, low, high, bins), got kind {domain.kind!r}")
    for key, value in (("low", domain.low), ("high", domain.high)):
        given = params.setdefault(key, value)
        if _finite(given) != value:
            raise ParameterError(f"oracle.{key} {params[key]!r} does not match the domain's "
                                 f"{value!r}")


_DEFAULT_ATTRIBUTE_MECHANISM = {"categories": "adaptive", "integers": "adaptive",
                                "interval": "pm"}


def _attribute_params(params: dict[str, Any], domain: Domain) -> None:
    """``multi`` takes its attributes from an ``attributes`` domain: each attribute's
    oracle is ``oracle.attributes[i]`` (``{mechanism, ...}``, optionally ``name``; a list
    in declaration order or a mapping name → spec), by default ``adaptive`` (GRR or OLH)
    for categories and integers and ``pm`` for intervals; its size (and interval) come
    from the attribute's domain."""
    if params["mechanism"] == "vector":
        raise ParameterError("mechanism 'vector' is the library's [-1, 1]^d mean estimator; a "
                             "collection declares mechanism 'multi' with interval attributes "
                             "(pm or duchi) instead")
    multi = params["mechanism"] == "multi"
    if domain.kind == "attributes" and not multi:
        raise ParameterError(f"a domain of kind 'attributes' needs mechanism 'multi', got "
                             f"{params['mechanism']!r}")
    if not multi:
        return
    if domain.kind != "attributes":
        raise ParameterError(f"mechanism 'multi' needs a domain of kind 'attributes', got kind "
                             f"{domain.kind!r}")
    names = [n for n, _ in domain.attributes]
    given = params.get("attributes")
    if given is None:
        given = [{} for _ in names]
    elif isinstance(given, Mapping):
        unknown = sorted(str(k) for k in given if k not in names)
        if unknown:
            raise ParameterError(f"oracle.attributes names {unknown} are not attributes of "
                                 f"the domain {names}")
        given = [given.get(n, {}) for n in names]
    if not isinstance(given, list) or len(given) != len(names):
        raise ParameterError(f"oracle.attributes must be a list of {len(names)} objects (one "
                             f"per domain attribute, in order) or a mapping name → object")
    out = []
    for (name, dom), raw in zip(domain.attributes, given, strict=True):
        if isinstance(raw, str):
            raw = {"mechanism": raw}
        if not isinstance(raw, Mapping):
            raise ParameterError(f"oracle.attributes ({name}) must be an object {{mechanism, "
                                 "...}} or a mechanism name")
        a = dict(raw)
        if a.setdefault("name", name) != name:
            raise ParameterError(f"oracle.attributes names {a['name']!r} where the domain's "
                                 f"attribute is {name!r} (same order)")
        a.setdefault("mechanism", _DEFAULT_ATTRIBUTE_MECHANISM[dom.kind])
        inner = {k: v for k, v in a.items() if k != "name"}
        try:
            _numeric_params(inner, dom)
        except ParameterError as exc:
            raise ParameterError(f"oracle.attributes ({name}): {exc}") from None
        if "bins" in inner and inner["bins"] != dom.size:
            raise ParameterError(f"oracle.attributes ({name}).bins {inner['bins']!r} does not "
                                 f"match the domain's {dom.size}")
        inner.pop("bins", None)
        if inner.setdefault("domain_size", dom.size) != dom.size:
            raise ParameterError(f"oracle.attributes ({name}).domain_size "
                                 f"{inner['domain_size']!r} does not match the domain's "
                                 f"{dom.size} values")
        out.append({"name": name, **inner})
    params["attributes"] = out


def load_collections(raw: Any) -> list[CollectionSpec]:
    """Parse a declaration document: a list of specs or ``{"collections": [...]}``."""
    if isinstance(raw, Mapping):
        raw = raw.get("collections")
    if not isinstance(raw, list):
        raise ParameterError("a collections file holds a list, or {'collections': [...]}")
    specs = [CollectionSpec.from_dict(x) for x in raw]
    ids = [s.id for s in specs]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ParameterError(f"collection id(s) declared twice: {dup}")
    return specs


def window_start(timestamp_ms: int, window_seconds: int) -> int:
    """Start (epoch seconds) of the tumbling window holding ``timestamp_ms``.

    >>> window_start(7_200_999, 3600)
    7200
    """
    return (int(timestamp_ms) // 1000 // window_seconds) * window_seconds
