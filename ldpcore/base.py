"""Base classes: report batches, additive sufficient-statistics states, and oracles.

Every mechanism is a :class:`Mechanism` subclass that declares

* its report layout as a tuple of :class:`Column` (a report batch is columnar:
  one numpy array per column, first axis = report),
* the shape of its integer state (independent of the number of reports), and
* vectorised kernels: ``_perturb`` and ``_aggregate`` (and, for a
  :class:`FrequencyOracle`, ``_estimate`` and ``variance``).

The base class does the rest once: validation, spec and fingerprint, state
arithmetic and serialisation.
"""

from __future__ import annotations

import hashlib
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from ._bounds import (
    DEFAULT_DOMAIN_RANGE,
    DEFAULT_EPSILON_RANGE,
    EXACT_EPSILON_MAX_64,
    ranges,
)
from ._validate import as_rng, check_epsilon, check_float, check_int, check_values
from .capabilities import FrequencyEstimates
from .errors import ParameterError, ReportError, StateError
from .state import FloatArray, IntArray, State

__all__ = ["Column", "Reports", "State", "IntArray", "FloatArray", "Mechanism", "FrequencyOracle",
           "KeptEstimate", "canonical_json", "spec_fingerprint"]

_SAMPLE_CHUNK = 1 << 16


def canonical_json(obj: Any) -> str:
    """Canonical JSON text: sorted keys, no spaces; the input of fingerprints."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def spec_fingerprint(spec: dict[str, Any]) -> str:
    """Stable 16-hex-digit fingerprint (SHA-256 prefix) of a canonical spec."""
    return hashlib.sha256(canonical_json(spec).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Column:
    """One column of a report batch.

    Parameters
    ----------
    name:
        Column name (also its key in JSON records).
    dtype:
        numpy dtype string of the stored column (``"uint8"``, ``"uint32"``, ...).
    low, high:
        Inclusive range of every entry (for ``bits`` columns: ignored).
    bits:
        If > 0 the column is a bitmask of ``bits`` bits per report, packed
        little-endian into ``ceil(bits / 8)`` ``uint8`` bytes (``np.packbits``
        with ``bitorder="little"``); padding bits must be zero.
    """

    name: str
    dtype: str
    low: int = 0
    high: int = 0
    bits: int = 0

    @property
    def width(self) -> int:
        """Bytes per report of a ``bits`` column, 0 for a scalar column."""
        return (self.bits + 7) // 8 if self.bits else 0

    @classmethod
    def index(cls, name: str, size: int) -> Column:
        """A column of indices in ``[0, size)``: ``uint16`` when they fit, else ``uint32``.

        >>> Column.index("y", 1 << 16).dtype, Column.index("y", (1 << 16) + 1).dtype
        ('uint16', 'uint32')
        """
        return cls(name, "uint16" if size <= 2**16 else "uint32", 0, size - 1)


class Reports:
    """A batch of perturbed reports of one oracle, stored column-wise.

    ``len(reports)`` is the number of reports.  Batches can be sliced
    (``reports[10:20]``) and concatenated (:meth:`concat`).
    """

    __slots__ = ("mechanism", "fingerprint", "columns")

    def __init__(self, mechanism: str, fingerprint: str, columns: dict[str, np.ndarray]) -> None:
        self.mechanism = mechanism
        self.fingerprint = fingerprint
        self.columns = columns

    def __len__(self) -> int:
        first = next(iter(self.columns.values()), None)
        return 0 if first is None else int(first.shape[0])

    def __getitem__(self, item: slice | npt.NDArray[Any]) -> Reports:
        if isinstance(item, int):
            item = slice(item, item + 1)
        return Reports(self.mechanism, self.fingerprint,
                       {k: v[item] for k, v in self.columns.items()})

    def __repr__(self) -> str:
        return f"Reports(mechanism={self.mechanism!r}, n={len(self)}, columns={list(self.columns)})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Reports):
            return NotImplemented
        return (
            self.mechanism == other.mechanism
            and self.fingerprint == other.fingerprint
            and self.columns.keys() == other.columns.keys()
            and all(np.array_equal(v, other.columns[k]) for k, v in self.columns.items())
        )

    __hash__ = None  # type: ignore[assignment]

    @staticmethod
    def concat(batches: list[Reports]) -> Reports:
        """Concatenate batches of the same oracle (at least one batch)."""
        if not batches:
            raise ReportError("concat needs at least one batch")
        first = batches[0]
        for b in batches[1:]:
            if b.fingerprint != first.fingerprint:
                raise ReportError("cannot concatenate batches of different oracles "
                                  f"({first.fingerprint} and {b.fingerprint})")
        cols = {k: np.concatenate([b.columns[k] for b in batches]) for k in first.columns}
        return Reports(first.mechanism, first.fingerprint, cols)

    def row_keys(self) -> list[bytes]:
        """One bytes key per report (all columns of the row); for audits and tests."""
        n = len(self)
        parts = [np.ascontiguousarray(v).reshape(n, -1).view(np.uint8).reshape(n, -1)
                 for v in self.columns.values()]
        rows = np.concatenate(parts, axis=1) if parts else np.zeros((n, 0), np.uint8)
        return [r.tobytes() for r in rows]


class Mechanism(ABC):
    """An ε-LDP mechanism over the domain ``[0, domain_size)``: perturb, validate, aggregate.

    Subclasses set ``mechanism`` and implement ``_perturb``, ``_aggregate``,
    ``report_columns``, ``state_shape`` and ``params``.  What a mechanism can
    estimate from its state is declared by the capabilities it inherits
    (:mod:`ldpcore.capabilities`), e.g. :class:`FrequencyOracle`.

    Each class also declares the parameters it accepts (checked at construction, why
    these bounds: :mod:`ldpcore.limits`): ``epsilon_bounds`` and ``domain_size_bounds``
    (closed intervals) and ``parameter_ranges``, the human-readable range of every
    parameter that ``GET /v1/mechanisms`` lists.  A class that sets ``mechanism`` and
    takes only ε and ``domain_size`` may leave ``parameter_ranges`` out: it is then
    written from its two bounds.

    >>> from ldpcore.frequency.unary import OUE
    >>> OUE.epsilon_bounds, OUE.parameter_ranges["epsilon"]
    ((0.001, 9.7), 'real in [0.001, 9.7]')
    """

    mechanism: ClassVar[str] = ""
    epsilon_bounds: ClassVar[tuple[float, float]] = DEFAULT_EPSILON_RANGE
    """Allowed ε, both ends inclusive."""
    domain_size_bounds: ClassVar[tuple[int, int]] = DEFAULT_DOMAIN_RANGE
    """Allowed ``domain_size`` (``bins`` of the numeric oracles, ``2^bits`` of pem)."""
    parameter_ranges: ClassVar[Mapping[str, str]] = {}
    """Human-readable allowed range of every parameter (JSON-able; docs and the API)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "mechanism" in vars(cls) and "parameter_ranges" not in vars(cls):
            cls.parameter_ranges = ranges(cls.epsilon_bounds, cls.domain_size_bounds)

    @classmethod
    def exact_epsilon_max(cls) -> float:
        """The unrounded upper bound of ε that :attr:`epsilon_bounds` rounds down.

        The largest ε at which every probability the kernels compare with a uniform
        draw stays :data:`~ldpcore.limits.GRID_STEPS` grid steps from 0 and 1; this
        default is the float64 bound ``ln(2^53/1000 − 1)``.
        """
        return EXACT_EPSILON_MAX_64

    def __init__(self, *, epsilon: float, domain_size: int) -> None:
        lo, hi = self.epsilon_bounds
        self.epsilon = check_epsilon(epsilon, low=lo, high=hi,
                                     context=f"for mechanism {self.mechanism!r}")
        dlo, dhi = self.domain_size_bounds
        self.domain_size = check_int("domain_size", domain_size, low=dlo, high=dhi)

    # ---- description -------------------------------------------------------------------
    @property
    def params(self) -> dict[str, Any]:
        """Mechanism-specific parameters (resolved defaults included)."""
        return {}

    @property
    def spec(self) -> dict[str, Any]:
        """Canonical JSON-able spec; ``make_oracle(**oracle.spec)`` rebuilds an equal oracle."""
        return {"mechanism": self.mechanism, "epsilon": self.epsilon,
                "domain_size": self.domain_size, **self.params}

    @property
    def fingerprint(self) -> str:
        """Stable hash of :attr:`spec` (16 hex digits)."""
        return spec_fingerprint(self.spec)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mechanism):
            return NotImplemented
        return self.spec == other.spec

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.spec.items() if k != "mechanism")
        return f"{type(self).__name__}({args})"

    @property
    @abstractmethod
    def report_columns(self) -> tuple[Column, ...]:
        """Layout of a report."""

    @property
    @abstractmethod
    def state_shape(self) -> tuple[int, ...]:
        """Shape of ``State.counts``."""

    @property
    def report_bits(self) -> int:
        """Communication cost of one report in bits (information content of the columns)."""
        total = 0
        for c in self.report_columns:
            total += c.bits if c.bits else max(1, (c.high - c.low).bit_length())
        return total

    # ---- device side -------------------------------------------------------------------
    def perturb(self, values: Any, rng: np.random.Generator | int | None = None) -> Reports:
        """Perturb a batch of true values in ``[0, d)`` into a batch of reports.

        Without ``rng`` the randomness comes from OS entropy; an int seed or a
        ``numpy.random.Generator`` makes the output reproducible.
        """
        vals = check_values(values, self.domain_size)
        cols = self._perturb(vals, as_rng(rng))
        return Reports(self.mechanism, self.fingerprint, cols)

    @abstractmethod
    def _perturb(self, values: IntArray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Vectorised perturbation kernel; returns the report columns."""

    # ---- server side -------------------------------------------------------------------
    def new_state(self) -> State:
        """The empty state (n = 0, all counts zero)."""
        return State(self.fingerprint, 0, np.zeros(self.state_shape, dtype=np.int64))

    def check_origin(self, mechanism: str, fingerprint: str, *, what: str) -> None:
        """Raise :class:`ReportError` unless reports name this oracle's mechanism and fingerprint.

        ``what`` names the reports in the message (``"batch"``, ``"record 3"``).
        """
        if mechanism != self.mechanism:
            raise ReportError(f"{what}: mechanism {mechanism!r}, expected this oracle's "
                              f"{self.mechanism!r}", reason="mechanism")
        if fingerprint != self.fingerprint:
            raise ReportError(f"{what}: fingerprint {fingerprint!r}, expected this oracle's "
                              f"{self.fingerprint!r}", reason="fingerprint")

    def validate(self, reports: Reports) -> Reports:
        """Check a batch fits this oracle (mechanism, fingerprint, columns, dtypes, ranges).

        Returns the batch with columns cast to their declared dtypes; raises
        :class:`ReportError` naming what is wrong.
        """
        if not isinstance(reports, Reports):
            raise ReportError(f"expected a Reports batch, got {type(reports).__name__}",
                              reason="schema")
        self.check_origin(reports.mechanism, reports.fingerprint, what="reports")
        expected = [c.name for c in self.report_columns]
        if sorted(reports.columns) != sorted(expected):
            raise ReportError(f"report columns {sorted(reports.columns)} != expected {expected}",
                              reason="shape")
        n = len(reports)
        out: dict[str, np.ndarray] = {}
        for c in self.report_columns:
            arr = np.asarray(reports.columns[c.name])
            want_shape = (n, c.width) if c.bits else (n,)
            if arr.shape != want_shape:
                raise ReportError(f"column {c.name!r} has shape {arr.shape}, expected {want_shape}",
                                  reason="shape")
            if arr.dtype.kind not in "iub":
                raise ReportError(f"column {c.name!r} must hold integers, got dtype {arr.dtype}",
                                  reason="shape")
            if c.bits:
                if arr.dtype != np.uint8:
                    raise ReportError(f"column {c.name!r} must be uint8 bytes, got {arr.dtype}",
                                      reason="shape")
                pad = c.width * 8 - c.bits
                if pad and n and np.any(arr[:, -1] >> np.uint8(8 - pad)):
                    raise ReportError(f"column {c.name!r} has nonzero padding bits "
                                      f"beyond bit {c.bits}", reason="out_of_range")
            elif n:
                lo, hi = int(arr.min()), int(arr.max())
                if lo < c.low or hi > c.high:
                    bad = lo if lo < c.low else hi
                    raise ReportError(f"column {c.name!r} value {bad} outside [{c.low}, {c.high}]",
                                      reason="out_of_range")
            out[c.name] = arr.astype(c.dtype, copy=False)
        self._validate_columns(out)
        return Reports(self.mechanism, self.fingerprint, out)

    def _validate_columns(self, columns: dict[str, np.ndarray]) -> None:
        """Hook for mechanism-specific checks beyond dtype/shape/range (raise ReportError)."""

    def aggregate(self, reports: Reports) -> State:
        """Sufficient statistics of a batch: an additive :class:`State`."""
        rep = self.validate(reports)
        counts = self._aggregate(rep.columns)
        return State(self.fingerprint, len(rep), counts)

    @abstractmethod
    def _aggregate(self, columns: dict[str, np.ndarray]) -> IntArray:
        """Vectorised aggregation kernel; returns int64 counts of shape ``state_shape``."""

    def check_state(self, state: State) -> None:
        """Raise :class:`StateError` unless ``state`` belongs to this oracle."""
        if not isinstance(state, State):
            raise StateError(f"expected a State, got {type(state).__name__}")
        if state.fingerprint != self.fingerprint:
            raise StateError(f"state has fingerprint {state.fingerprint!r}, "
                             f"this oracle's is {self.fingerprint!r}")
        if state.counts.shape != self.state_shape:
            raise StateError(f"state has shape {state.counts.shape}, expected {self.state_shape}")

    def _check_variance_args(self, n: int, frequency: float) -> tuple[int, float]:
        return (check_int("n", n, low=1),
                check_float("frequency", frequency, low=0.0, high=1.0))

    @classmethod
    def _unit_test_params(cls) -> list[dict[str, Any]]:
        """Small parameter sets (besides ``epsilon``) that :mod:`ldpcore.checks` runs this
        mechanism with; each one builds a cheap oracle (river's ``_unit_test_params``)."""
        return [{"domain_size": 6}, {"domain_size": 37}, {"domain_size": 64}]


def owned(obj: Any, name: str) -> Any:
    """What :func:`own` kept on ``obj`` under ``name``, or None.  A (shallow) copy of obj
    does not see it: a copy may change the parameters the value depends on (the composed
    channel of :mod:`ldpcore.longitudinal` is a copy with other p and q)."""
    held = obj.__dict__.get(name)
    return held[1] if held is not None and held[0] == id(obj) else None


def own(obj: Any, name: str, value: Any) -> None:
    """Keep ``value`` on ``obj`` for obj itself (:func:`owned`)."""
    obj.__dict__[name] = (id(obj), value)


KEPT_ESTIMATES = 3
"""States whose estimate a frequency oracle keeps (:meth:`FrequencyOracle.kept_estimate`)."""

KEPT_ESTIMATE_MAX_BYTES = 1 << 20
"""A state is kept if its counts (copied: they identify it) and estimate fit this many bytes
(an OLH state at d = 1,024 and its estimate: 60 KB; the bound keeps what a service holding
many oracles keeps beside its byte-bounded caches to at most 3 MB an oracle)."""


class KeptEstimate:
    """A state's unbiased estimate (read-only), identified by the state's fingerprint, n
    and a copy of its counts (a state's counts may be changed in place, the copy not),
    with ``parts`` derived from it (e.g. its Norm-Sub fit: :mod:`ldpcore.intervals`)."""

    __slots__ = ("fingerprint", "n", "counts", "raw", "parts")

    def __init__(self, state: State, raw: FloatArray) -> None:
        self.fingerprint, self.n = state.fingerprint, int(state.n)
        self.counts = state.counts.copy()
        raw.setflags(write=False)
        self.raw = raw
        self.parts: dict[str, Any] = {}

    def holds(self, state: State) -> bool:
        """Whether this is ``state``'s estimate (same fingerprint, n and counts)."""
        return (self.fingerprint == state.fingerprint and self.n == state.n
                and self.counts.shape == state.counts.shape
                and np.array_equal(self.counts, state.counts))


class FrequencyOracle(Mechanism, FrequencyEstimates):
    """An ε-LDP frequency oracle: a mechanism that estimates every value's frequency.

    Subclasses also implement ``_estimate`` and ``variance``.
    """

    def estimate(self, state: State) -> FloatArray:
        """Unbiased frequency estimates (fractions summing to 1 in expectation), shape (d,)."""
        self.check_state(state)
        if state.n <= 0:
            raise StateError("cannot estimate from an empty state (n = 0)")
        return self.kept_estimate(state).raw.copy()

    def kept_estimate(self, state: State) -> KeptEstimate:
        """The unbiased estimate of ``state`` (a non-empty state of this oracle: checked by
        the caller), read-only, made once for the oracle's :data:`KEPT_ESTIMATES` latest
        states: a live service estimates each new state for several answers (frequencies,
        a subset, heavy hitters, a series' ranking), and the intervals keep what they
        derive from it beside it (:attr:`KeptEstimate.parts`)."""
        kept: list[KeptEstimate] = owned(self, "_kept_estimates") or []
        for entry in kept:
            if entry.holds(state):
                return entry
        entry = KeptEstimate(state, np.array(self._estimate(state.counts, state.n),
                                             dtype=np.float64))
        if state.counts.nbytes + entry.raw.nbytes <= KEPT_ESTIMATE_MAX_BYTES:
            # A new list swapped in whole: a thread reading the old one sees a whole list.
            own(self, "_kept_estimates", [entry, *kept][:KEPT_ESTIMATES])
        return entry

    @abstractmethod
    def _estimate(self, counts: IntArray, n: int) -> FloatArray:
        """Estimation kernel."""

    @abstractmethod
    def variance(self, n: int, frequency: float = 0.0) -> float:
        """Analytic variance of one frequency estimate from ``n`` reports.

        The variance is over the mechanism's randomness for a fixed population of
        n users of whom a fraction ``frequency`` hold the value (the convention of
        Wang et al. 2017).
        """

    def std_error(self, n: int, frequency: float = 0.0) -> float:
        """Standard error, ``sqrt(variance(n, frequency))``."""
        return math.sqrt(self.variance(n, frequency))

    # ---- simulation --------------------------------------------------------------------
    def check_distribution(self, distribution: Any) -> FloatArray:
        """A probability vector over ``[0, d)`` (non-negative, finite, summing to 1 ± 1e-9).

        Returned renormalised to sum exactly 1; raises :class:`ParameterError` otherwise.
        """
        d = self.domain_size
        arr = np.asarray(distribution, dtype=np.float64)
        if arr.shape != (d,) or not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise ParameterError(f"distribution must be {d} finite non-negative numbers "
                                 f"summing to 1 (a probability vector over [0, {d}))")
        total = float(arr.sum())
        if abs(total - 1.0) > 1e-9:
            raise ParameterError(f"distribution must sum to 1 (within 1e-9), got {total!r}")
        out: FloatArray = arr / total
        return out

    def sample_state(self, distribution: FloatArray, n: int,
                     rng: np.random.Generator | int | None = None) -> State:
        """A state distributed exactly as ``aggregate(perturb(values))`` for n i.i.d. values.

        The n true values are drawn i.i.d. from ``distribution`` (a probability
        vector over ``[0, d)``); the state is what aggregating their perturbed
        reports gives.  This is the simulation primitive of the parametric
        bootstrap (:mod:`ldpcore.intervals`): it costs nothing in privacy (it
        never sees a report) and, for the mechanisms that override
        :meth:`_sample_counts`, O(state size + d) whatever n.

        The base implementation draws the value counts ``Multinomial(n,
        distribution)`` and perturbs and aggregates them in bounded chunks: O(n),
        exact for every mechanism.

        >>> import ldpcore
        >>> o = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=4)
        >>> s = o.sample_state([0.5, 0.5, 0.0, 0.0], 1000, rng=1)
        >>> s.n, int(s.counts.sum())
        (1000, 1000)
        """
        counts = self.sample_counts(distribution, n, size=1, rng=rng)[0]
        return State(self.fingerprint, int(n), counts)

    def sample_counts(self, distribution: Any, n: int, *, size: int,
                      rng: np.random.Generator | int | None = None) -> IntArray:
        """``size`` independent draws of :meth:`sample_state`'s counts, shape (size, *state_shape).

        Vectorised over the draws for the mechanisms that override
        :meth:`_sample_counts`; a subclass that overrides only :meth:`sample_state`
        is sampled draw by draw.
        """
        dist = self.check_distribution(distribution)
        n = check_int("n", n, low=0)
        size = check_int("size", size, low=1)
        gen = as_rng(rng)
        if type(self).sample_state is not FrequencyOracle.sample_state:
            return np.stack([self.sample_state(dist, n, rng=gen).counts for _ in range(size)])
        return self._sample_counts(dist, n, size, gen)

    def _sample_counts(self, distribution: FloatArray, n: int, size: int,
                       rng: np.random.Generator) -> IntArray:
        """Kernel of :meth:`sample_counts`; the default perturbs and aggregates (O(n) per draw).

        Overrides draw the counts through the mechanism's channel directly.  When each
        report is one categorical output (one state cell), the n i.i.d. reports make the
        state exactly ``Multinomial(n, P)`` with ``P`` the output distribution of one
        report under ``distribution``.
        """
        out = np.zeros((size, *self.state_shape), dtype=np.int64)
        d = self.domain_size
        for r in range(size):
            value_counts = rng.multinomial(n, distribution)
            values = np.repeat(np.arange(d, dtype=np.int64), value_counts)
            for start in range(0, n, _SAMPLE_CHUNK):
                cols = self._perturb(values[start:start + _SAMPLE_CHUNK], rng)
                out[r] += self._aggregate(cols)
        return out

    def sample_cost(self, n: int) -> int:
        """Rough elementary operations of one :meth:`sample_counts` draw of n reports.

        n per report (times the report's bytes) when every report is perturbed; the
        state size plus d for the channel overrides (and for a subclass overriding
        :meth:`sample_state`, presumed to simulate the state directly).
        """
        cls = type(self)
        cells = math.prod(self.state_shape) + self.domain_size
        if (cls._sample_counts is not FrequencyOracle._sample_counts
                or cls.sample_state is not FrequencyOracle.sample_state):
            return cells
        width = sum(c.width or 1 for c in self.report_columns)
        return cells + int(n) * width

    def estimate_counts(self, counts: IntArray, n: int) -> FloatArray:
        """Unbiased estimates of many states at once: counts (R, *state_shape) → (R, d).

        All states have n reports (as drawn by :meth:`sample_counts`).
        """
        if counts.shape[1:] != self.state_shape:
            raise StateError(f"counts have shape {counts.shape[1:]} per state, "
                             f"expected {self.state_shape}")
        n = check_int("n", n, low=1)
        return self._estimate_batch(counts, n)

    def _estimate_batch(self, counts: IntArray, n: int) -> FloatArray:
        """Kernel of :meth:`estimate_counts`; the default estimates draw by draw."""
        if counts.shape[0] == 0:
            return np.zeros((0, self.domain_size))
        return np.stack([self._estimate(c, n) for c in counts])
