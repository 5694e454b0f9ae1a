r"""Several questions per device: each report answers ``k`` sampled attributes at ε/k.

A device holds one value per attribute (categorical, integer or numeric, each with
its own oracle).  Per report it samples ``k`` of the ``m`` attributes uniformly
without replacement, independently of its values, and perturbs each sampled value
with that attribute's oracle at :math:`\varepsilon/k`.  By sequential composition
the report is ε-LDP; which attributes were sampled reveals nothing (it does not
depend on the values).  ``k = 1`` *partitions the users* across the questions
(parallel composition); ``k = m`` *splits the budget* (every user answers every
question at :math:`\varepsilon/m`).  The lecture slides ("On answering multiple
questions") and Wang et al., "Collecting and analyzing multidimensional data with
local differential privacy", ICDE 2019 (Algorithm 4, :math:`k = \max(1,
\min(d, \lfloor \varepsilon/2.5 \rfloor))`) show that sampling (small k) is more
accurate: for OLH the split variance :math:`4e^{\varepsilon/m}/(n(e^{\varepsilon/m}
- 1)^2)` exceeds the partition variance :math:`4 m e^{\varepsilon}/(n(e^{\varepsilon}
- 1)^2)` for every m ≥ 2 (:mod:`ldpcore.multi.compare`; oracle noise only — the
sampling term below can reverse it at large ε, e.g. Duchi at ε = 4 with m = 2, see
``bench/results/multiattr.md``).

Estimation per attribute.  Let :math:`n_j` be the number of reports that sampled
attribute j (:math:`n_j \sim \mathrm{Bin}(n, k/m)`, :math:`E[n_j] = nk/m`, stored in
the state).  Because the sample is independent of the values, the attribute's own
unbiased estimator applied to those :math:`n_j` reports is unbiased for the whole
population of n users.  Given :math:`n_j` its variance is the oracle's analytic
variance at :math:`n_j` reports, :math:`\mathrm{Var}_j(\varepsilon/k, n_j)`, plus
the variance of drawing those :math:`n_j` users out of n,
:math:`S^2 (n - n_j)/(n_j (n - 1))` (:math:`S^2 = f(1-f)` for a frequency; the
slides' comparison assumes this "sample variance is small", true at small ε); with
:math:`n_j \approx nk/m` the first term is :math:`\mathrm{Var}_j(\varepsilon/k, n)
\,m/k`.  The estimate is scaled by the realised sampling fraction :math:`n_j/n`
rather than the nominal k/m, which removes part of the sampling noise of the
Horvitz–Thompson form :math:`(m/k)\sum y/n` (offered for numeric vectors in
:mod:`ldpcore.multi.vector`).

Optional 2-way marginals (``pairs``) are further questions answered with the joint
value of two attributes: with p pairs a report samples k of the m + p questions.

Reports are columnar: ``attrs`` is an (m + p)-bit mask of the sampled questions (exactly
k bits set); for each attribute ``name`` and each column ``c`` of its oracle a column
``name.c``, zero in the reports that did not sample it.  The state is additive:
the per-question report counts ``[n_0 … n_{m+p-1}]`` followed by every question's
oracle state, flattened.

:meth:`~ldpcore.base.Mechanism.perturb` takes the *mixed-radix* index of the value
tuple (attribute 0 most significant, :meth:`MultiAttribute.combine`), so the domain
``[0, ∏ d_j)`` behaves like any mechanism's for the generic checks and the ε audit
(when ∏ d_j ≤ 2^62; ``domain_size`` is capped there); devices call
:meth:`MultiAttribute.perturb_attributes` with an ``(n, m)`` array of per-attribute
indices.

>>> import ldpcore
>>> o = ldpcore.make_oracle("multi", epsilon=2.0, attributes=[
...     {"name": "os", "mechanism": "grr", "domain_size": 3},
...     {"name": "age", "mechanism": "pm", "bins": 10, "low": 0, "high": 100}])
>>> o.domain_size, o.attribute("os").epsilon, [c.name for c in o.report_columns]
(30, 2.0, ['attrs', 'os.y', 'age.y'])
>>> st = o.aggregate(o.perturb_attributes([[0, 3], [2, 9], [1, 5]], rng=1))
>>> o.attribute_counts(st).tolist() == [o.attribute_state(st, a).n for a in ("os", "age")]
True
>>> round(o.attribute_variance("os", 1000) / o.attribute("os").variance(1000), 6)  # m/k
2.0
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._bounds import EPSILON_MAX_64, EPSILON_MIN, MAX_STATE_CELLS, real_in
from .._validate import as_rng, check_epsilon, check_int
from ..base import Column, FloatArray, IntArray, Mechanism, Reports, State
from ..capabilities import AttributeEstimates, FrequencyEstimates, MeanEstimates
from ..errors import ParameterError, ReportError

__all__ = ["MultiAttribute", "MAX_ATTRIBUTES", "MAX_PRODUCT", "ATTRIBUTE_NAME_RE",
           "sampling_variance"]

MAX_ATTRIBUTES = 64
"""At most this many attributes per collection (the sampled-attributes mask is ≤ 8 bytes)."""
MAX_PRODUCT = 1 << 62
"""``domain_size`` is the product of the attributes' domain sizes, capped at 2^62; beyond
it the mixed-radix index is unavailable (:attr:`MultiAttribute.mixed_radix`)."""
ATTRIBUTE_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


def sampling_variance(spread: float, n: int, reports: float) -> float:
    r"""Variance of the mean of ``reports`` values drawn without replacement from n values
    of population variance ``spread`` (:math:`S^2 (n - n_j)/(n_j (n - 1))`; 0 when all
    are drawn).

    >>> sampling_variance(0.25, 1000, 1000), round(sampling_variance(0.25, 1001, 500), 6)
    (0.0, 0.000251)
    """
    if n <= 1 or reports >= n:
        return 0.0
    return spread * (n - reports) / (reports * (n - 1))


def _check_attributes(raw: Any) -> list[dict[str, Any]]:
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence) or not raw:
        raise ParameterError(f"attributes must be a non-empty list of 1 to {MAX_ATTRIBUTES} "
                             "objects {name, mechanism, ...}")
    if len(raw) > MAX_ATTRIBUTES:
        raise ParameterError(f"attributes: at most {MAX_ATTRIBUTES}, got {len(raw)}")
    out = []
    for i, a in enumerate(raw):
        if not isinstance(a, Mapping):
            raise ParameterError(f"attributes[{i}] must be an object {{name, mechanism, ...}}, "
                                 f"got {type(a).__name__}")
        name = a.get("name")
        if not isinstance(name, str) or not ATTRIBUTE_NAME_RE.match(name):
            raise ParameterError(f"attributes[{i}].name must match {ATTRIBUTE_NAME_RE.pattern}, "
                                 f"got {name!r}")
        if not all(isinstance(k, str) for k in a):
            raise ParameterError(f"attributes[{i}] ({name}): parameter names must be strings")
        if "mechanism" not in a:
            raise ParameterError(f"attributes[{i}] ({name}) needs a 'mechanism'")
        if "epsilon" in a:
            raise ParameterError(f"attributes[{i}] ({name}): epsilon is derived (the "
                                 "collection's ε divided by sample); do not give it")
        out.append(dict(a))
    names = [a["name"] for a in out]
    dup = sorted({x for x in names if names.count(x) > 1})
    if dup:
        raise ParameterError(f"attribute names must be distinct, repeated: {dup}")
    return out


def _check_pairs(raw: Any, names: list[str]) -> list[dict[str, Any]]:
    """Validate ``pairs``: entries ``[a, b]`` or ``{"attributes": [a, b], "mechanism": ...,
    <its parameters but epsilon>}`` over distinct declared attributes, each pair once."""
    if raw is None:
        return []
    if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Sequence):
        raise ParameterError("pairs must be a list of [a, b] or {attributes: [a, b], "
                             "mechanism, ...}")
    out: list[dict[str, Any]] = []
    seen: set[frozenset[str]] = set()
    for i, p in enumerate(raw):
        spec = dict(p) if isinstance(p, Mapping) else {"attributes": p}
        ab = spec.get("attributes")
        if (isinstance(ab, (str, bytes)) or not isinstance(ab, Sequence) or len(ab) != 2
                or not all(isinstance(x, str) for x in ab)):
            raise ParameterError(f"pairs[{i}] must name two attributes, e.g. "
                                 f"[{names[0]!r}, {names[-1]!r}], got {ab!r}")
        a, b = ab
        if a == b or a not in names or b not in names:
            raise ParameterError(f"pairs[{i}] must name two different attributes of "
                                 f"{names}, got [{a!r}, {b!r}]")
        if frozenset(ab) in seen:
            raise ParameterError(f"pairs[{i}]: the pair ({a}, {b}) is declared twice")
        if "epsilon" in spec or "name" in spec or not all(isinstance(k, str) for k in spec):
            raise ParameterError(f"pairs[{i}] ({a}*{b}): give attributes, mechanism and its "
                                 "parameters (epsilon is derived)")
        seen.add(frozenset(ab))
        spec["attributes"] = [a, b]
        out.append(spec)
    return out


class MultiAttribute(Mechanism, AttributeEstimates):
    """m attributes, each with its own oracle; a report answers ``sample`` of them at ε/k.

    Parameters
    ----------
    epsilon:
        The privacy budget of one report (all its sampled attributes together).
    attributes:
        A list of ``{"name": ..., "mechanism": ..., <that mechanism's parameters
        except epsilon>}``; names match ``[A-Za-z][A-Za-z0-9_-]{0,63}`` and are
        distinct; 1 to 64 attributes.  A mechanism that estimates neither
        frequencies nor means (e.g. a nested ``multi``) is refused.
    sample:
        k in [1, m + p], the questions answered per report, each at ε/k.
    pairs:
        Optional 2-way marginals: ``[a, b]`` or ``{"attributes": [a, b], "mechanism":
        ..., ...}`` (default mechanism ``adaptive``: GRR or OLH over the d_a·d_b value
        pairs).  Each pair is one more question, named ``"a*b"``, answered with the joint
        index :math:`v_a d_b + v_b` (the slides' "partition users" across marginals, as
        in CALM); :meth:`marginal` gives the (d_a, d_b) table.
    domain_size:
        Optional; if given it must equal min(∏ d_j, 2^62) (the mixed-radix domain).

    See the module docstring for the estimators and the paper.
    """

    mechanism = "multi"
    epsilon_bounds = (EPSILON_MIN, EPSILON_MAX_64)  # and ε/sample within every attribute's
    domain_size_bounds = (2, 1 << 62)  # the product of the attributes' sizes, capped at 2^62
    parameter_ranges = {
        "epsilon": real_in(epsilon_bounds) + "; each attribute runs at epsilon/sample, within its "
                                             "mechanism's range",
        "attributes": "list of 1 to 64 {name, mechanism, <its parameters but epsilon>}, "
                      "distinct names [A-Za-z][A-Za-z0-9_-]{0,63}",
        "sample": "integer k in [1, attributes + pairs] (default 1)",
        "pairs": "optional list of [a, b] or {attributes: [a, b], mechanism, ...}: "
                 "2-way marginals, each pair of different attributes once",
        "domain_size": "optional; the product of the attributes' sizes, capped at 2^62"}

    def __init__(self, *, epsilon: float, attributes: Sequence[Mapping[str, Any]] | None = None,
                 sample: int = 1, pairs: Sequence[Any] | None = None,
                 domain_size: int | None = None) -> None:
        lo, hi = self.epsilon_bounds
        eps = check_epsilon(epsilon, low=lo, high=hi,
                            context=f"for mechanism {self.mechanism!r}")
        if domain_size is not None:
            check_int("domain_size", domain_size, low=2, high=MAX_PRODUCT)
        attrs = _check_attributes(attributes)
        m = len(attrs)
        pair_specs = _check_pairs(pairs, [a["name"] for a in attrs])
        q = m + len(pair_specs)
        if q > MAX_ATTRIBUTES:
            raise ParameterError(f"attributes and pairs: at most {MAX_ATTRIBUTES} questions, "
                                 f"got {q}")
        self.sample = check_int("sample", sample, low=1, high=q)
        from ..registry import make_oracle

        subs: list[Mechanism] = []
        for i, a in enumerate(attrs):
            params = {k: v for k, v in a.items() if k != "name"}
            try:
                sub = make_oracle(**params, epsilon=eps / self.sample)
            except ParameterError as exc:
                raise ParameterError(f"attributes[{i}] ({a['name']}): {exc}") from None
            if isinstance(sub, AttributeEstimates) or not isinstance(
                    sub, (FrequencyEstimates, MeanEstimates)):
                raise ParameterError(f"attributes[{i}] ({a['name']}): mechanism "
                                     f"{sub.mechanism!r} cannot be an attribute (it must "
                                     "estimate frequencies or a mean)")
            subs.append(sub)
        names = [a["name"] for a in attrs]
        self._pairs: tuple[tuple[int, int], ...] = ()
        for i, pair in enumerate(pair_specs):
            a, b = pair["attributes"]
            ia, ib = names.index(a), names.index(b)
            params = {k: v for k, v in pair.items() if k != "attributes"}
            params.setdefault("mechanism", "adaptive")
            params.setdefault("domain_size", subs[ia].domain_size * subs[ib].domain_size)
            try:
                sub = make_oracle(**params, epsilon=eps / self.sample)
            except ParameterError as exc:
                raise ParameterError(f"pairs[{i}] ({a}*{b}): {exc}") from None
            if (not isinstance(sub, FrequencyEstimates) or isinstance(sub, MeanEstimates)
                    or sub.domain_size != subs[ia].domain_size * subs[ib].domain_size):
                raise ParameterError(f"pairs[{i}] ({a}*{b}): needs a frequency oracle over "
                                     f"the {subs[ia].domain_size * subs[ib].domain_size} "
                                     "value pairs")
            self._pairs += ((ia, ib),)
            subs.append(sub)
        product = min(math.prod(s.domain_size for s in subs[:m]), MAX_PRODUCT)
        if domain_size is not None and domain_size != product:
            raise ParameterError(f"domain_size {domain_size} does not match the product of the "
                                 f"attributes' domain sizes (capped at 2^62): {product}")
        self._names = tuple(names) + tuple(f"{names[i]}*{names[j]}" for i, j in self._pairs)
        self._subs = tuple(subs)
        self._m = m
        sizes = [math.prod(s.state_shape) for s in subs]
        self._offsets = tuple(int(x) for x in np.cumsum([q, *sizes])[:-1])
        self._cells = q + sum(sizes)
        if self._cells > MAX_STATE_CELLS:
            raise ParameterError(f"the attributes' states hold {self._cells} cells > "
                                 f"{MAX_STATE_CELLS}")
        self._radix = tuple(s.domain_size for s in subs[:m])
        self.mixed_radix = math.prod(self._radix) <= MAX_PRODUCT
        """True when value tuples fit one index (∏ d_j ≤ 2^62): :meth:`perturb` and
        :meth:`combine` work; else only :meth:`perturb_attributes`."""
        super().__init__(epsilon=eps, domain_size=product)

    # ---- description -------------------------------------------------------------------
    @property
    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sample": self.sample, "attributes": [
            {"name": name, **{k: v for k, v in sub.spec.items() if k != "epsilon"}}
            for name, sub in zip(self._names[:self._m], self._subs[:self._m], strict=True)]}
        if self._pairs:  # left out when absent: specs without pairs keep their fingerprint
            out["pairs"] = [
                {"attributes": [self._names[i], self._names[j]],
                 **{k: v for k, v in sub.spec.items() if k != "epsilon"}}
                for (i, j), sub in zip(self._pairs, self._subs[self._m:], strict=True)]
        return out

    @property
    def input_names(self) -> tuple[str, ...]:
        """The attributes a device holds (one value each), in order; :attr:`attribute_names`
        adds the 2-way marginals ``"a*b"`` answered from them."""
        return self._names[:self._m]

    def marginal(self, state: State, a: str, b: str) -> FloatArray:
        """The 2-way marginal of attributes a and b (declared as a pair): unbiased joint
        frequencies, shape (d_a, d_b)."""
        name = f"{a}*{b}"
        if name not in self._names[self._m:]:
            raise ParameterError(f"({a}, {b}) is not a declared pair; pairs: "
                                 f"{list(self._names[self._m:])}")
        da, db = self.attribute(a).domain_size, self.attribute(b).domain_size
        return self.attribute_frequencies(state, name).reshape(da, db)

    @property
    def attribute_names(self) -> tuple[str, ...]:
        return self._names

    @property
    def sampling_probability(self) -> float:
        """k/m: the probability that a report answers a given attribute."""
        return self.sample / len(self._names)

    def _index(self, name: str) -> int:
        try:
            return self._names.index(name)
        except ValueError:
            raise ParameterError(f"unknown attribute {name!r}; attributes: "
                                 f"{list(self._names)}") from None

    def attribute(self, name: str) -> Mechanism:
        """The oracle (at ε/k) of attribute ``name``."""
        return self._subs[self._index(name)]

    @property
    def report_columns(self) -> tuple[Column, ...]:
        cols = [Column("attrs", "uint8", bits=len(self._names))]
        for name, sub in zip(self._names, self._subs, strict=True):
            cols.extend(Column(f"{name}.{c.name}", c.dtype, min(c.low, 0), c.high, c.bits)
                        for c in sub.report_columns)
        return tuple(cols)

    @property
    def state_shape(self) -> tuple[int, ...]:
        return (self._cells,)

    @property
    def report_bits(self) -> int:
        """Bits of one report: the mask plus the k sampled attributes' reports (the
        widest k)."""
        widths = sorted((s.report_bits for s in self._subs), reverse=True)
        return len(self._names) + sum(widths[:self.sample])

    # ---- device side -------------------------------------------------------------------
    def combine(self, values: Any) -> IntArray:
        """Per-attribute indices, shape (n, m), → mixed-radix indices in [0, ∏ d_j).

        >>> import ldpcore
        >>> o = ldpcore.make_oracle("multi", epsilon=1.0, attributes=[
        ...     {"name": "a", "mechanism": "grr", "domain_size": 3},
        ...     {"name": "b", "mechanism": "grr", "domain_size": 4}])
        >>> o.combine([[2, 1], [0, 3]]).tolist(), o.split(o.combine([[2, 1]])).tolist()
        ([9, 3], [[2, 1]])
        """
        vals = self._check_matrix(values)
        self._need_radix()
        out = np.zeros(vals.shape[0], dtype=np.int64)
        for j, d in enumerate(self._radix):
            out = out * d + vals[:, j]
        return out

    def _need_radix(self) -> None:
        if not self.mixed_radix:
            raise ParameterError("the attributes' domain sizes multiply to more than 2^62, so a "
                                 "value tuple has no single index: use perturb_attributes")

    def split(self, index: Any) -> IntArray:
        """Inverse of :meth:`combine`: mixed-radix indices → (n, m) per-attribute indices."""
        x = np.asarray(index, dtype=np.int64).copy()
        out = np.zeros((x.size, len(self._radix)), dtype=np.int64)
        for j in range(len(self._radix) - 1, -1, -1):
            out[:, j] = x % self._radix[j]
            x //= self._radix[j]
        return out

    def _check_matrix(self, values: Any) -> IntArray:
        m = self._m
        arr = np.asarray(values)
        if arr.ndim == 1 and arr.size == m:
            arr = arr.reshape(1, m)
        if arr.ndim != 2 or arr.shape[1] != m:
            raise ParameterError(f"values must be an (n, {m}) array: one index per attribute "
                                 f"{list(self.input_names)}, got shape {arr.shape}")
        if arr.size and arr.dtype.kind not in "iu":
            if not (arr.dtype.kind == "f" and np.all(np.isfinite(arr))
                    and np.all(arr == np.floor(arr))):
                raise ParameterError(f"values must be integer indices, got dtype {arr.dtype}")
        vals = arr.astype(np.int64, copy=False)
        for j, (name, d) in enumerate(zip(self.input_names, self._radix, strict=True)):
            col = vals[:, j]
            if col.size and (col.min() < 0 or col.max() >= d):
                bad = int(col.min()) if col.min() < 0 else int(col.max())
                raise ParameterError(f"attribute {name!r}: values must be integers in "
                                     f"[0, {d}), found {bad}")
        return vals

    def perturb_attributes(self, values: Any,
                           rng: np.random.Generator | int | None = None) -> Reports:
        """Perturb (n, m) per-attribute indices (one row per device) into n reports."""
        vals = self._check_matrix(values)
        return Reports(self.mechanism, self.fingerprint, self._perturb_matrix(vals, as_rng(rng)))

    def _perturb(self, values: IntArray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        self._need_radix()
        return self._perturb_matrix(self.split(values), rng)

    def sample_mask(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """(n, m) booleans: k attributes per row, uniformly without replacement."""
        m, k = len(self._names), self.sample
        if k == m:
            return np.ones((n, m), dtype=bool)
        mask = np.zeros((n, m), dtype=bool)
        if k == 1:
            mask[np.arange(n), rng.integers(0, m, size=n)] = True
            return mask
        chosen = np.argsort(rng.random((n, m)), axis=1)[:, :k]
        mask[np.arange(n)[:, None], chosen] = True
        return mask

    def _perturb_matrix(self, vals: IntArray, rng: np.random.Generator,
                        unit: FloatArray | None = None) -> dict[str, np.ndarray]:
        n, m = vals.shape[0], len(self._names)
        mask = self.sample_mask(n, rng)
        if self._pairs:  # the pair questions' values: joint indices
            joint = [vals[:, i] * self._radix[j] + vals[:, j] for i, j in self._pairs]
            vals = np.concatenate([vals, np.stack(joint, axis=1)], axis=1)
        cols: dict[str, np.ndarray] = {
            "attrs": np.packbits(mask, axis=1, bitorder="little").reshape(n, (m + 7) // 8)}
        for j, (name, sub) in enumerate(zip(self._names, self._subs, strict=True)):
            rows = np.flatnonzero(mask[:, j])
            if unit is not None:
                t = 2 * unit[rows, j] - 1
                part = sub.report_columns_of_t(t, rng)  # type: ignore[attr-defined]
            else:
                part = sub._perturb(vals[rows, j], rng)
            for c in sub.report_columns:
                full = np.zeros((n, c.width) if c.bits else n, dtype=c.dtype)
                full[rows] = part[c.name]
                cols[f"{name}.{c.name}"] = full
        return cols

    # ---- server side -------------------------------------------------------------------
    def _mask(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        attrs = np.asarray(columns["attrs"], dtype=np.uint8)
        m = len(self._names)
        return np.unpackbits(attrs, axis=1, count=m, bitorder="little").astype(bool)

    def _sub_columns(self, j: int, columns: Mapping[str, np.ndarray],
                     rows: np.ndarray) -> dict[str, np.ndarray]:
        name, sub = self._names[j], self._subs[j]
        return {c.name: columns[f"{name}.{c.name}"][rows] for c in sub.report_columns}

    def _validate_columns(self, columns: dict[str, np.ndarray]) -> None:
        mask = self._mask(columns)
        if mask.shape[0] and np.any(mask.sum(axis=1) != self.sample):
            raise ReportError(f"column 'attrs' must mark exactly {self.sample} of the "
                              f"{len(self._names)} attributes in every report",
                              reason="out_of_range")
        for j, (name, sub) in enumerate(zip(self._names, self._subs, strict=True)):
            off = ~mask[:, j]
            for c in sub.report_columns:
                key = f"{name}.{c.name}"
                if np.any(columns[key][off]):
                    raise ReportError(f"column {key!r} is nonzero in a report that did not "
                                      f"sample attribute {name!r}", reason="out_of_range")
            part = self._sub_columns(j, columns, np.flatnonzero(mask[:, j]))
            try:
                sub.validate(Reports(sub.mechanism, sub.fingerprint, part))
            except ReportError as exc:
                raise ReportError(f"attribute {name!r}: {exc}", reason=exc.reason) from None

    def _aggregate(self, columns: dict[str, np.ndarray]) -> IntArray:
        mask = self._mask(columns)
        out = np.zeros(self.state_shape, dtype=np.int64)
        m = len(self._names)
        out[:m] = mask.sum(axis=0)
        for j, sub in enumerate(self._subs):
            part = self._sub_columns(j, columns, np.flatnonzero(mask[:, j]))
            size = math.prod(sub.state_shape)
            out[self._offsets[j]:self._offsets[j] + size] = sub._aggregate(part).ravel()
        return out

    # ---- estimation --------------------------------------------------------------------
    def attribute_counts(self, state: State) -> IntArray:
        """n_j: the number of reports that answered each attribute, shape (m,)."""
        self.check_state(state)
        return state.counts[:len(self._names)].copy()

    def attribute_state(self, state: State, name: str) -> State:
        """The state of attribute ``name``'s oracle over the n_j reports that answered it.

        Every estimator of that oracle (frequencies, means, ranges, its analytic variance
        at ``n = n_j``) applies unchanged and is unbiased for the whole population.
        """
        self.check_state(state)
        j = self._index(name)
        sub = self._subs[j]
        size = math.prod(sub.state_shape)
        counts = state.counts[self._offsets[j]:self._offsets[j] + size]
        return State(sub.fingerprint, int(state.counts[j]), counts.reshape(sub.state_shape).copy())

    def attribute_frequencies(self, state: State, name: str) -> FloatArray:
        """Unbiased frequencies of a categorical attribute (its oracle's estimator on n_j)."""
        sub = self.attribute(name)
        if not isinstance(sub, FrequencyEstimates):
            raise ParameterError(f"attribute {name!r} ({sub.mechanism}) does not estimate "
                                 "frequencies")
        return sub.estimate(self.attribute_state(state, name))

    def attribute_mean(self, state: State, name: str) -> float:
        """Unbiased mean of a numeric attribute, in value units."""
        sub = self.attribute(name)
        if not isinstance(sub, MeanEstimates):
            raise ParameterError(f"attribute {name!r} ({sub.mechanism}) does not estimate a mean")
        return sub.mean(self.attribute_state(state, name))

    def _reports(self, n: int, reports: int | None) -> tuple[int, float]:
        n = check_int("n", n, low=1)
        if reports is None:
            return n, n * self.sampling_probability
        return n, float(check_int("reports", reports, low=1, high=n))

    def attribute_variance(self, name: str, n: int, frequency: float = 0.0, *,
                           reports: int | None = None) -> float:
        r"""Variance of attribute ``name``'s frequency estimate, as an estimate of the
        frequency among all n reporting users:

        .. math:: \mathrm{Var}_j(\varepsilon/k, n_j, f)
                  + f(1-f)\,\frac{n - n_j}{n_j (n - 1)}

        (the oracle's variance at the :math:`n_j` reports that answered it, plus the
        variance of drawing those :math:`n_j` of the n users without replacement).
        ``reports`` is the realised :math:`n_j`; by default its expectation nk/m.
        """
        sub = self.attribute(name)
        if not isinstance(sub, FrequencyEstimates):
            raise ParameterError(f"attribute {name!r} ({sub.mechanism}) does not estimate "
                                 "frequencies")
        n, n_j = self._reports(n, reports)
        f = float(frequency)
        return sub.variance(n, f) * n / n_j + sampling_variance(f * (1 - f), n, n_j)

    def attribute_mean_variance(self, name: str, n: int, *, reports: int | None = None,
                                spread: float | None = None) -> float:
        r"""Worst-case variance of attribute ``name``'s mean as an estimate of the mean of
        all n reporting users: the oracle's worst-case variance at :math:`n_j` reports plus
        :math:`S^2 (n - n_j)/(n_j(n-1))`, with :math:`S^2` the population variance of the
        values (``spread``; by default its bound :math:`((high - low)/2)^2`).  Both terms
        peak together (half the values at each end), so the sum is attained."""
        sub = self.attribute(name)
        if not isinstance(sub, MeanEstimates):
            raise ParameterError(f"attribute {name!r} ({sub.mechanism}) does not estimate a mean")
        n, n_j = self._reports(n, reports)
        if spread is None:
            spread = ((sub.high - sub.low) / 2) ** 2  # type: ignore[attr-defined]
        return sub.mean_variance(n) * n / n_j + sampling_variance(float(spread), n, n_j)

    def attribute_effective_size(self, name: str, n: int, reports: int) -> float:
        r"""The sample size at which attribute ``name``'s own oracle variance covers its
        estimate's whole variance (oracle noise at :math:`n_j` reports plus the sampling
        term), for every frequency: :math:`n_j / r` with

        .. math:: r = 1 + \frac{n - n_j}{n - 1}\,\max_f \frac{f(1-f)}{v_1(f)}

        (:math:`v_1(f)` the oracle's variance of one report, f on a grid of 1001 points)
        or, for a mean, :math:`r = 1 + \frac{n - n_j}{n - 1}((high - low)/2)^2 / v_1`.
        Variances are ∝ 1/n, so any interval computed at this n (analytic or simulated)
        accounts for the sampling of the attribute, conservatively.  Equals
        :math:`n_j` when every report answers the attribute (k = m).
        """
        sub = self.attribute(name)
        n, n_j = self._reports(n, reports)
        c = (n - n_j) / (n - 1) if n > 1 else 0.0
        if c <= 0:
            return n_j
        if isinstance(sub, FrequencyEstimates):
            # The ratio depends on the attribute's oracle alone: computed once per name
            # (1,001 variance calls cost ~40 ms, at every answer of the attribute).
            ratios: dict[str, float] = self.__dict__.setdefault("_sampling_ratios", {})
            ratio = ratios.get(name, math.nan)
            if math.isnan(ratio):
                f = np.linspace(0.0, 1.0, 1001)
                v1 = np.array([sub.variance(1, float(x)) for x in f])
                ratio = ratios[name] = float(np.max(f * (1 - f) / v1))
        else:
            assert isinstance(sub, MeanEstimates)
            ratio = ((sub.high - sub.low) / 2) ** 2 / sub.mean_variance(1)  # type: ignore[attr-defined]
        return n_j / (1 + c * ratio)

    @classmethod
    def _unit_test_params(cls) -> list[dict[str, Any]]:
        return [
            {"attributes": [{"name": "os", "mechanism": "grr", "domain_size": 3},
                            {"name": "age", "mechanism": "pm", "bins": 4}]},
            {"sample": 2, "attributes": [
                {"name": "a", "mechanism": "oue", "domain_size": 5},
                {"name": "b", "mechanism": "duchi", "bins": 2},
                {"name": "c", "mechanism": "olh", "domain_size": 6}]},
            {"attributes": [{"name": "a", "mechanism": "grr", "domain_size": 3},
                            {"name": "b", "mechanism": "oue", "domain_size": 4}],
             "pairs": [["a", "b"]]},
        ]
