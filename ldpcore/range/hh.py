"""Hierarchical histograms with level sampling and constrained inference (Cormode et al. 2019)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._bounds import EPSILON_MAX_64, EPSILON_MIN, MAX_STATE_CELLS, integer_in, real_in
from .._state_sampling import check_distribution, sample_counts
from .._validate import as_rng, check_epsilon, check_int
from ..base import Column, FloatArray, FrequencyOracle, IntArray, Reports, State
from ..consistency.hierarchy import tree_nonneg_wls
from ..consistency.normalize import simplex_projection
from ..errors import ParameterError
from .base import LevelBlocks, RangeMixin, check_range_method

__all__ = ["HierarchicalHistogram", "BASES"]

BASES = ("oue", "hrr", "olh", "grr")


def _check_levels(epsilon: float, base: str, fanout: int, height: int) -> None:
    """The per-level base oracles must accept ε and B^height (before building them)."""
    from ..registry import oracle_class

    cls = oracle_class(base)
    lo, hi = cls.epsilon_bounds
    check_epsilon(epsilon, low=lo, high=hi, context=f"for hh with base {base!r}")
    dlo, dhi = cls.domain_size_bounds
    if fanout**height > dhi:
        raise ParameterError(
            f"fanout={fanout} pads the domain to {fanout}^{height} = {fanout**height} leaves, "
            f"more than base {base!r} allows ({dhi}); choose a fanout whose power just covers "
            f"domain_size, or another base")


class HierarchicalHistogram(LevelBlocks, RangeMixin, FrequencyOracle):
    r"""HH_B: a B-ary tree over [0, D), one sampled level per user, any base oracle.

    The domain is padded to :math:`B^h`.  Each user samples a level
    :math:`l \in \{1..h\}` uniformly (sampling, not splitting ε) and reports the
    index of its node at that level through the base oracle over the
    :math:`B^l` nodes of the level.  The state concatenates the base oracles'
    states of all levels and the per-level report counts.

    With ``consistency=True`` the node estimates go through the two-stage
    constrained inference of Hay et al. (Section 4.5): bottom-up weighted
    averaging :math:`\bar f(v) = \frac{B^i-B^{i-1}}{B^i-1} f(v) +
    \frac{B^{i-1}-1}{B^i-1}\sum_{u \in child(v)} \bar f(u)` (i = height, leaves
    i = 1), then top-down mean consistency :math:`\hat f(v) = \bar f(v) +
    \frac1B[\hat f(p(v)) - \sum_{u \in child(p(v))} \bar f(u)]` from the root's
    known total 1.  It is linear and unbiased, costs O(D), and makes every range
    answer the sum of its leaves.  ``nonnegative=True`` then projects the leaves
    onto the probability simplex.

    Every query takes ``method``: ``"unbiased"`` (default; the answers above) or
    ``"consistent"``: the exact solution of the slides' HH-ADMM problem (see
    :meth:`_fit_consistent`): non-negative leaves summing to 1, every node the sum of
    its children, weighted by the levels' variances.  It is a query-time choice, so
    it does not enter the fingerprint.  :meth:`sample_state` draws a state exactly
    distributed as ``aggregate(perturb(values))`` without simulating the reports.

    Range variance (Theorem 4.3 with :math:`p_l = 1/h`, Eq. (1)):
    :math:`V_r \le (2B-1)\,h\,\alpha\,V_F`, :math:`\alpha = \lceil\log_B r\rceil + 1`;
    after consistency :math:`(B+1)/2` replaces :math:`2B-1` (Section 4.5, Eq. (2)).
    Both are increased by :math:`\alpha h/(4n)` for the level-sampling noise of a
    fixed population.

    Parameters
    ----------
    fanout : int, optional
        B in [2, 1024], with :math:`B^h` within the base's domain range and the whole
        state within 2^26 cells (see :mod:`ldpcore.limits`; ε must also be within the
        base's range, e.g. at most 9.7 for ``"oue"``); default 8 with consistency (the
        paper's optimum B ≈ 9.2 rounded to a power of two) and 4 without.
    base : {"hrr", "oue", "olh", "grr"}
        The per-level frequency oracle; default ``"hrr"`` (constant-size reports:
        scales to D = 2^22, where OUE would send D bits per user).
    consistency : bool
        Constrained inference (default True).
    nonnegative : bool
        Project the consistent leaves onto the simplex (default False).

    Examples
    --------
    >>> import ldpcore, numpy as np
    >>> o = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=1000)
    >>> o.fanout, o.height, o.base
    (8, 4, 'hrr')
    >>> values = np.random.default_rng(0).integers(0, 500, 200_000)
    >>> st = o.aggregate(o.perturb(values, rng=1))
    >>> abs(o.range_query(st, 0, 499) - 1.0) < 4 * o.range_variance(st.n, 0, 499) ** 0.5
    True
    >>> c = o.cdf(st, method="consistent")
    >>> bool(np.all(np.diff(c) >= 0)), float(c[-1]), o.range_query(st, 0, 999, "consistent")
    (True, 1.0, 1.0)
    """

    mechanism = "hh"
    epsilon_bounds = (EPSILON_MIN, EPSILON_MAX_64)  # and at most the base's upper bound
    domain_size_bounds = (2, 1 << 22)
    parameter_ranges = {
        "epsilon": real_in(epsilon_bounds) + ", at most the base's upper bound (9.7 for oue)",
        "domain_size": integer_in(domain_size_bounds),
        "fanout": "integer in [2, 1024]; fanout^height within the base's domain_size range "
                  "and the whole state <= 2^26 cells",
        "base": "one of oue, hrr, olh, grr", "consistency": "boolean",
        "nonnegative": "boolean"}

    def __init__(self, *, epsilon: float, domain_size: int, fanout: int | None = None,
                 base: str = "hrr", consistency: bool = True, nonnegative: bool = False) -> None:
        from ..registry import make_frequency_oracle

        FrequencyOracle.__init__(self, epsilon=epsilon, domain_size=domain_size)
        if not isinstance(consistency, bool):
            raise ParameterError(f"consistency must be true or false, got {consistency!r}")
        if not isinstance(nonnegative, bool):
            raise ParameterError(f"nonnegative must be true or false, got {nonnegative!r}")
        if base not in BASES:
            raise ParameterError(f"base must be one of {list(BASES)}, got {base!r}")
        if fanout is None:
            fanout = 8 if consistency else 4
        self.fanout = check_int("fanout", fanout, low=2, high=1024)
        self.base, self.consistency, self.nonnegative = base, consistency, nonnegative
        h = 1
        while self.fanout**h < self.domain_size:
            h += 1
        self.height = h
        self.padded = self.fanout**h
        _check_levels(self.epsilon, base, self.fanout, h)
        self.levels = [make_frequency_oracle(base, epsilon=self.epsilon,
                                             domain_size=self.fanout**lv)
                       for lv in range(1, h + 1)]
        sizes = [math.prod(o.state_shape) for o in self.levels]
        self._lay_out_levels(sizes)
        if sum(sizes) + h > MAX_STATE_CELLS:
            raise ParameterError(f"fanout={self.fanout} with base {base!r} needs a state of "
                                 f"{sum(sizes) + h} cells (allowed: at most {MAX_STATE_CELLS}); "
                                 f"choose another fanout or base")

    @property
    def params(self) -> dict[str, Any]:
        return {"fanout": self.fanout, "base": self.base, "consistency": self.consistency,
                "nonnegative": self.nonnegative}

    @property
    def report_columns(self) -> tuple[Column, ...]:
        return (Column("level", "uint8", 1, self.height),) + self.levels[-1].report_columns

    # ---- device side ------------------------------------------------------------------
    def _perturb(self, values: IntArray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        n, h = values.size, self.height
        level = self._draw_levels(n, rng)
        cols: dict[str, np.ndarray] = {"level": level.astype(np.uint8)}
        for c in self.levels[-1].report_columns:
            shape = (n, c.width) if c.bits else (n,)
            cols[c.name] = np.zeros(shape, dtype=c.dtype)
        for lv, oracle in enumerate(self.levels, start=1):
            rows = np.flatnonzero(level == lv)
            sub = oracle._perturb(values[rows] // self.fanout ** (h - lv), rng)
            for name, arr in sub.items():
                if arr.ndim == 2:
                    cols[name][rows, :arr.shape[1]] = arr
                else:
                    cols[name][rows] = arr
        return cols

    def sample_state(self, distribution: FloatArray, n: int,
                     rng: np.random.Generator | int | None = None) -> State:
        r"""A state distributed exactly as ``aggregate(perturb(values))`` for n values i.i.d.
        from ``distribution`` (over [0, D)).

        The level counts are :math:`\mathrm{Multinomial}(n, 1/h, \dots, 1/h)`; given
        :math:`n_l`, level l's reports are :math:`n_l` i.i.d. values of the node
        distribution :math:`\pi_l` (block sums of π over :math:`B^{h-l}` leaves) through
        the base oracle, sampled by :func:`ldpcore._state_sampling.sample_counts`: one
        multinomial (HRR, GRR) or binomials (OUE) per level, O(state) whatever n.
        Base ``"olh"`` uses the base oracle's own ``sample_state`` when it has one and
        otherwise really perturbs the level's values in chunks (O(n)).

        >>> import numpy as np, ldpcore
        >>> o = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=1000)
        >>> st = o.sample_state(np.full(1000, 1e-3), 10**9, rng=1)
        >>> st.n == int(st.counts[-o.height:].sum()) == 10**9
        True
        """
        dist = check_distribution(distribution, self.domain_size)
        n = check_int("n", n, low=0)
        gen = as_rng(rng)
        pad = np.zeros(self.padded)
        pad[:self.domain_size] = dist
        out = np.zeros(self.state_shape, dtype=np.int64)
        n_level = gen.multinomial(n, np.full(self.height, 1.0 / self.height))
        for lv, oracle in enumerate(self.levels, start=1):
            nodes = pad.reshape(self.fanout**lv, -1).sum(axis=1)
            block = sample_counts(oracle, nodes / nodes.sum(), int(n_level[lv - 1]), gen)
            out[self._offsets[lv - 1]:self._offsets[lv]] = block.reshape(-1)
        out[self._offsets[-1]:] = n_level
        return State(self.fingerprint, n, out)

    # ---- server side ------------------------------------------------------------------
    def _level_reports(self, columns: dict[str, np.ndarray], lv: int) -> dict[str, np.ndarray]:
        rows = columns["level"] == lv
        oracle = self.levels[lv - 1]
        out = {}
        for c in oracle.report_columns:
            arr = columns[c.name][rows]
            out[c.name] = arr[:, :c.width] if c.bits else arr
        return out

    def _validate_columns(self, columns: dict[str, np.ndarray]) -> None:
        for lv, oracle in enumerate(self.levels, start=1):
            sub = self._level_reports(columns, lv)
            for c in oracle.report_columns:
                if c.bits:
                    full = columns[c.name][columns["level"] == lv]
                    if full.shape[1] > c.width and np.any(full[:, c.width:]):
                        from ..errors import ReportError

                        raise ReportError(f"column {c.name!r} has bits beyond level {lv}'s "
                                          f"{c.bits} nodes", reason="out_of_range")
            oracle.validate(Reports(oracle.mechanism, oracle.fingerprint, sub))

    def _aggregate(self, columns: dict[str, np.ndarray]) -> IntArray:
        out = np.zeros(self.state_shape, dtype=np.int64)
        for lv, oracle in enumerate(self.levels, start=1):
            sub = self._level_reports(columns, lv)
            a, b = self._offsets[lv - 1], self._offsets[lv]
            out[a:b] = oracle._aggregate(sub).reshape(-1)
        out[self._offsets[-1]:] = np.bincount(columns["level"].astype(np.int64),
                                              minlength=self.height + 1)[1:]
        return out

    def node_estimates(self, state: State, method: str = "unbiased") -> list[FloatArray]:
        """Per-level node frequency estimates, level 1 first (padded to B^l nodes).

        ``"unbiased"``: the constructor's choice (raw, or after Hay et al.'s constrained
        inference); ``"consistent"``: the block sums of :meth:`leaves` (``"consistent"``).
        """
        if check_range_method(method) == "consistent":
            leaves = np.zeros(self.padded)
            leaves[:self.domain_size] = self._consistent_leaves(state)
            return [leaves.reshape(self.fanout**lv, -1).sum(axis=1)
                    for lv in range(1, self.height + 1)]
        return [x.copy() for x in self._unbiased_nodes(state)]

    def _unbiased_nodes(self, state: State) -> list[FloatArray]:
        """:meth:`node_estimates` (unbiased), made once per state (read-only, shared)."""
        def make() -> list[FloatArray]:
            raw = self._raw_levels(state)
            nodes = raw if not self.consistency else self._constrained_inference(raw)
            for x in nodes:
                x.setflags(write=False)
            return nodes

        out: list[FloatArray] = self._per_state("unbiased-nodes", state, make)
        return out

    def _raw_levels(self, state: State) -> list[FloatArray]:
        """Per-level raw estimates (made once per state, with the unbiased nodes and the
        consistent fit's input; fresh arrays: the caller may modify them)."""
        self.check_state(state)
        self._check_nonempty(state)
        return [x.copy() for x in self._per_state("raw-levels", state,
                                                  lambda: self._raw_levels_of(state))]

    def _raw_levels_of(self, state: State) -> list[FloatArray]:
        counts = state.counts
        n_level = counts[self._offsets[-1]:]
        raw = []
        for lv, oracle in enumerate(self.levels, start=1):
            block = counts[self._offsets[lv - 1]:self._offsets[lv]].reshape(oracle.state_shape)
            nl = int(n_level[lv - 1])
            raw.append(oracle._estimate(block, nl) if nl else np.zeros(oracle.domain_size))
        return raw

    def level_weights(self, state: State) -> FloatArray:
        r"""Precision :math:`w_l = 1/V_l(n_l, 0)` of a level-l node estimate (0 if the level
        has no report), where :math:`V_l` is the level's base-oracle variance and
        :math:`n_l` its report count; the leaf level gets a tiny positive weight if empty."""
        n_level = state.counts[self._offsets[-1]:]
        w = np.array([1.0 / o.variance(int(nl), 0.0) if nl > 0 else 0.0
                      for o, nl in zip(self.levels, n_level, strict=True)])
        if w[-1] <= 0:
            w[-1] = 1e-9 * float(w.max())
        return w

    def _fit_consistent(self, state: State) -> FloatArray:
        r"""HH-ADMM's problem, solved exactly by
        :func:`ldpcore.consistency.hierarchy.tree_nonneg_wls` (a dynamic programme over
        the tree, no iterations):

        .. math:: \min_x \tfrac12\sum_l w_l \lVert x_l - \tilde f_l\rVert^2 \ \text{s.t.}\
                  x_l = \text{child sums of } x_{l+1},\ x_h \ge 0,\ \textstyle\sum x_h = 1,

        on the raw per-level estimates :math:`\tilde f_l` with the precisions of
        :meth:`level_weights` (the slides' HH-ADMM objective, weighted because levels
        differ).  Padding leaves (values >= D) are fixed at 0."""
        raw = self._raw_levels(state)
        return tree_nonneg_wls(raw, self.level_weights(state), self.fanout, self.domain_size)

    def _constrained_inference(self, raw: list[FloatArray]) -> list[FloatArray]:
        b, h = self.fanout, self.height

        def child_sum(x: FloatArray) -> FloatArray:
            out: FloatArray = x.reshape(-1, b).sum(axis=1)
            return out

        bar = [np.empty(0)] * h
        bar[h - 1] = raw[h - 1]
        for lv in range(h - 1, 0, -1):  # bottom-up, lv is 1-based level of the node
            i = h - lv + 1
            w = (b**i - b ** (i - 1)) / (b**i - 1)
            bar[lv - 1] = w * raw[lv - 1] + (1 - w) * child_sum(bar[lv])
        hat = [np.empty(0)] * h
        parent = np.ones(1)
        for lv in range(1, h + 1):  # top-down from the root's exact total of 1
            gap = parent - child_sum(bar[lv - 1])
            hat[lv - 1] = bar[lv - 1] + np.repeat(gap, b) / b
            parent = hat[lv - 1]
        if self.nonnegative:
            # Padding leaves (values >= D) hold no user: project the real ones only.
            leaves = np.zeros(self.padded)
            leaves[:self.domain_size] = simplex_projection(hat[-1][:self.domain_size])
            hat = [leaves.reshape(-1, b ** (h - lv)).sum(axis=1) for lv in range(1, h + 1)]
        return hat

    def _estimate(self, counts: IntArray, n: int) -> FloatArray:
        state = State(self.fingerprint, n, counts)
        return self._unbiased_nodes(state)[-1][:self.domain_size].copy()

    def _unbiased_leaves(self, state: State) -> FloatArray:
        # The per-state nodes (not estimate(): it would keep a second copy of the state).
        self._check_range_state(state)
        return self._unbiased_nodes(state)[-1][:self.domain_size].copy()

    def _unbiased_cdf(self, state: State) -> FloatArray:
        """P[X <= x] for all x, each prefix [0, x] = [0, y) with y = x + 1 answered by its
        minimal B-adic decomposition (the nodes :meth:`range_query` uses): at the level of
        nodes spanning s leaves, the ``(y // s) % B`` nodes just left of ``y // s``; the
        root (total 1) when y spans the padded domain.  Vectorised over all x."""
        nodes = self._unbiased_nodes(state)
        root, ends = self._prefix_nodes()
        total: FloatArray = root.copy()  # the root, known to hold everything
        for lv, (q, start) in enumerate(ends, start=1):
            csum = np.concatenate([[0.0], np.cumsum(nodes[lv - 1])])
            total += csum[q] - csum[start]
        return total

    def _prefix_nodes(self) -> tuple[FloatArray, list[tuple[IntArray, IntArray]]]:
        """Of :meth:`_unbiased_cdf`'s decompositions (they depend on the oracle alone, kept
        by it): the root's share of every prefix, and per level the end ``y // s`` of its
        nodes and where they start, ``y // s - (y // s) % B``."""
        kept: tuple[FloatArray, list[tuple[IntArray, IntArray]]] | None = \
            self.__dict__.get("_prefix_nodes_kept")
        if kept is None:
            y = np.arange(1, self.domain_size + 1)
            h, b = self.height, self.fanout
            ends = []
            for lv in range(1, h + 1):
                q = y // b ** (h - lv)
                ends.append((q, q - q % b))
            kept = ((y // b**h).astype(float), ends)
            for arr in (kept[0], *(a for pair in ends for a in pair)):
                arr.setflags(write=False)
            self.__dict__["_prefix_nodes_kept"] = kept
        return kept

    def range_query(self, state: State, lo: int, hi: int, method: str = "unbiased") -> float:
        """Unbiased: the sum of the nodes of the B-adic decomposition of [lo, hi] (at most
        2(B−1) per level); consistent: the sum of the consistent leaves in [lo, hi]."""
        if check_range_method(method) == "consistent":
            return super().range_query(state, lo, hi, method)
        lo, hi = self._check_range(lo, hi)
        nodes = self._unbiased_nodes(state)
        b, lv, ans = self.fanout, self.height, 0.0
        while lo <= hi:
            if lv == 0:
                return ans + 1.0
            level = nodes[lv - 1]
            while lo % b and lo <= hi:
                ans += level[lo]
                lo += 1
            while (hi + 1) % b and lo <= hi:
                ans += level[hi]
                hi -= 1
            if lo > hi:
                break
            lo, hi, lv = lo // b, (hi + 1) // b - 1, lv - 1
        return float(ans)

    def variance(self, n: int, frequency: float = 0.0) -> float:
        r"""Variance of a leaf estimate: :math:`h\,V_{base}(n, f) + f(1-f)(h-1)/n`.

        The leaf level sees about n/h users (variance ∝ 1/n), plus the sampling
        noise of which users land on it.  Exact without consistency; an upper
        bound with it (constrained inference only lowers variance).
        """
        n, f = self._check_variance_args(n, frequency)
        h = self.height
        return h * self.levels[-1].variance(n, f) + f * (1 - f) * (h - 1) / n

    def range_variance(self, n: int, lo: int, hi: int) -> float:
        lo, hi = self._check_range(lo, hi)
        n = check_int("n", n, low=1)
        r, b, h = hi - lo + 1, self.fanout, self.height
        alpha = min(h, math.ceil(math.log(r, b) - 1e-12) + 1)
        vf = max(o.variance(n, 0.0) for o in self.levels)
        per_level = (b + 1) / 2 if self.consistency else 2 * b - 1
        return per_level * h * alpha * vf + alpha * h / (4 * n)
