r"""Set-valued inputs: batches of item sets, padding-and-sampling, privacy amplification.

A device holding a *set* :math:`v \subseteq [0, d)` of items (apps used today, the
emoji of a message) cannot report every item at ε each.  Padding and sampling
(Qin et al., *LDPMiner*, CCS 2016; Wang, Li & Jha, *Locally Differentially
Private Frequent Itemset Mining*, IEEE S&P 2018, §IV) reports *one* item:

1. pad :math:`v` to length :math:`l` with dummy items :math:`\bot_1..\bot_l`
   (if :math:`|v| > l`, keep a uniform random :math:`l`-subset of :math:`v`);
2. sample one entry of the padded set uniformly;
3. report it through a frequency oracle over the :math:`d + l` values
   (items, then dummies).

Equivalently item :math:`x \in v` is sampled with probability
:math:`1/\max(|v|, l)` and a (uniform) dummy with probability
:math:`(l - \min(|v|, l))/l`.  The estimate of item :math:`x` is :math:`l` times
the oracle's estimate of :math:`x`, unbiased for the fraction of devices holding
:math:`x` when every :math:`|v| \le l` (and biased low by the truncation
otherwise, which SVIM corrects, :mod:`ldpcore.setvalued.svim`).

**Privacy amplification** (S&P 2018, Thm. 3; lecture slides "Privacy
Amplification").  For GRR at :math:`\varepsilon'` over the padded domain, an
output :math:`y` has probability :math:`q' + (p' - q') s_v(y)` where
:math:`s_v(y) \le 1/l` is the chance of sampling :math:`y`; the worst ratio over
two sets is :math:`(q' + (p'-q')/l)/q' = 1 + (e^{\varepsilon'} - 1)/l`, so GRR may
run at

.. math:: \varepsilon' = \ln\bigl(l (e^\varepsilon - 1) + 1\bigr)

and the whole device-side randomiser is ε-LDP.  The bound needs each output to
be likely under *one* input only.  It does **not** hold for local hashing: an
OLH output :math:`(a, t)` is likely for every item with :math:`h_a(x) = t`, and
all :math:`l` padded items may hash to :math:`t`, so the worst ratio stays
:math:`e^{\varepsilon'}`.  Here OLH therefore runs at the plain ε (the test
``test_olh_at_the_amplified_epsilon_is_caught`` shows the audit catching the
amplified version); the adaptive choice compares GRR at :math:`\varepsilon'`
with OLH at :math:`\varepsilon`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._validate import as_rng, check_int
from ..base import FrequencyOracle, Reports
from ..errors import ParameterError

__all__ = ["SetBatch", "SetValued", "flatten_sets", "amplified_epsilon", "padded_sample",
           "choose_inner", "support_probabilities", "ps_variance", "INNER_ORACLES"]

IntArray = npt.NDArray[np.int64]

INNER_ORACLES = ("grr", "olh")
"""Frequency oracles a padded sample can be reported with (the slides' adaptive choice)."""


def amplified_epsilon(epsilon: float, length: int) -> float:
    r"""The GRR budget of padding to ``length``: :math:`\varepsilon' = \ln(l(e^\varepsilon-1)+1)`.

    >>> round(amplified_epsilon(1.0, 1), 12), round(amplified_epsilon(1.0, 4), 4)
    (1.0, 2.0635)
    """
    return math.log(length * math.expm1(epsilon) + 1.0)


def flatten_sets(sets: Iterable[Any], *, what: str,
                 item: Callable[[int, Any], Any] = lambda i, x: x,
                 ) -> tuple[npt.NDArray[np.int64], list[Any], int]:
    """The owners and items of a batch of sets, one pair per item, and the number of sets.

    ``what`` says what a set must be (the error for a string or a non-iterable);
    ``item(i, x)`` vets item ``x`` of set ``i`` and returns what to keep of it.

    >>> owners, flat, n = flatten_sets([[3, 4], [], [5]], what="a list")
    >>> owners.tolist(), flat, n
    ([0, 0, 2], [3, 4, 5], 3)
    """
    owners: list[int] = []
    flat: list[Any] = []
    n = 0
    for i, s in enumerate(sets):
        n = i + 1
        if isinstance(s, (str, bytes)) or not isinstance(s, Iterable):
            raise ParameterError(f"set {i} must be {what}, got {s!r}")
        for x in s:
            flat.append(item(i, x))
            owners.append(i)
    return np.asarray(owners, dtype=np.int64), flat, n


class SetBatch:
    """A batch of n item sets over ``[0, domain_size)`` in CSR form.

    ``items[offsets[i]:offsets[i+1]]`` are the distinct items of set i (sorted).
    Build with :meth:`from_any` from a list of iterables of ints, a 2-D 0/1
    membership matrix of shape (n, d), or a 1-D int array (singleton sets).

    >>> b = SetBatch.from_any([[3, 1, 1], [], [0]], domain_size=4)
    >>> b.lengths.tolist(), b.items.tolist()
    ([2, 0, 1], [1, 3, 0])
    >>> b.restrict([1, 0]).items.tolist()  # positions in the candidate list
    [0, 1]
    """

    __slots__ = ("items", "offsets", "domain_size")

    def __init__(self, items: IntArray, offsets: IntArray, domain_size: int) -> None:
        self.items = items
        self.offsets = offsets
        self.domain_size = domain_size

    def __len__(self) -> int:
        return int(self.offsets.size - 1)

    @property
    def lengths(self) -> IntArray:
        """|v| of every set."""
        out: IntArray = np.diff(self.offsets)
        return out

    @property
    def owners(self) -> IntArray:
        """For every entry of :attr:`items`, the index of its set."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.lengths)

    def __getitem__(self, rows: IntArray | slice) -> SetBatch:
        idx = np.arange(len(self))[rows]
        lens = self.lengths[idx]
        offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        take = (np.repeat(self.offsets[idx] - offs[:-1], lens) + np.arange(offs[-1]))
        return SetBatch(self.items[take.astype(np.int64)], offs, self.domain_size)

    def to_lists(self) -> list[list[int]]:
        """The sets as sorted lists of ints."""
        return [self.items[a:b].tolist() for a, b in zip(self.offsets[:-1], self.offsets[1:],
                                                          strict=True)]

    @classmethod
    def from_pairs(cls, owners: IntArray, items: IntArray, n: int, domain_size: int) -> SetBatch:
        """Sets from (set index, item) pairs; duplicates collapse."""
        key = np.unique(owners.astype(np.int64) * domain_size + items.astype(np.int64))
        own, it = np.divmod(key, domain_size)
        offs = np.concatenate([[0], np.cumsum(np.bincount(own, minlength=n))]).astype(np.int64)
        return cls(it.astype(np.int64), offs, domain_size)

    @classmethod
    def from_any(cls, sets: Any, domain_size: int) -> SetBatch:
        """Validate and convert a batch of sets (see the class docstring).

        Raises :class:`ParameterError` for items outside ``[0, domain_size)`` or
        anything that is not a batch of sets of integers.
        """
        d = domain_size
        if isinstance(sets, SetBatch):
            if sets.domain_size != d:
                raise ParameterError(f"set batch is over {sets.domain_size} items, expected {d}")
            return sets
        if isinstance(sets, np.ndarray) and sets.ndim == 2:
            if sets.shape[1] != d or sets.dtype.kind not in "biu" or (
                    sets.size and (sets.min() < 0 or sets.max() > 1)):
                raise ParameterError(f"a membership matrix must be 0/1 of shape (n, {d}), got "
                                     f"{sets.dtype} {sets.shape}")
            own, it = np.nonzero(sets)
            return cls.from_pairs(own, it, sets.shape[0], d)
        if isinstance(sets, np.ndarray) and sets.ndim == 1 and sets.dtype.kind in "iu":
            sets = [[int(x)] for x in sets]
        if isinstance(sets, (str, bytes)) or not isinstance(sets, Iterable):
            raise ParameterError("sets must be a list of iterables of item indices in "
                                 f"[0, {d}) or a 0/1 matrix of shape (n, {d})")
        def item(i: int, x: Any) -> int:
            if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not 0 <= int(x) < d:
                raise ParameterError(f"set {i} holds {x!r}; items must be integers in [0, {d})")
            return int(x)

        owners, flat, n = flatten_sets(sets, what="an iterable of item indices", item=item)
        return cls.from_pairs(owners, np.asarray(flat, dtype=np.int64), n, d)

    def restrict(self, candidates: Sequence[int]) -> SetBatch:
        """Intersect every set with ``candidates``; items become positions in that list."""
        pos = np.full(self.domain_size, -1, dtype=np.int64)
        pos[np.asarray(candidates, dtype=np.int64)] = np.arange(len(candidates))
        mapped = pos[self.items]
        keep = mapped >= 0
        return SetBatch.from_pairs(self.owners[keep], mapped[keep], len(self), len(candidates))

    def itemsets(self, itemsets: Sequence[Sequence[int]]) -> SetBatch:
        """For every set v, the positions of the ``itemsets`` contained in v."""
        owners = self.owners
        member = np.zeros((len(self), self.domain_size), dtype=bool)
        member[owners, self.items] = True
        own_l, it_l = [], []
        for j, its in enumerate(itemsets):
            have = np.all(member[:, np.asarray(its, dtype=np.int64)], axis=1)
            rows = np.flatnonzero(have)
            own_l.append(rows)
            it_l.append(np.full(rows.size, j, dtype=np.int64))
        own = np.concatenate(own_l) if own_l else np.zeros(0, np.int64)
        its_ = np.concatenate(it_l) if it_l else np.zeros(0, np.int64)
        return SetBatch.from_pairs(own, its_, len(self), max(len(itemsets), 1))


def padded_sample(batch: SetBatch, length: int, rng: np.random.Generator) -> IntArray:
    r"""One padded-and-sampled entry per set: an item in ``[0, m)`` or a dummy in ``[m, m+l)``.

    Item :math:`x \in v` comes out with probability :math:`1/\max(|v|, l)`; a
    dummy, uniform over the l dummies, with probability
    :math:`(l - \min(|v|, l))/l`.
    """
    lens = batch.lengths
    n = lens.size
    m = batch.domain_size
    slot = rng.integers(0, length, size=n)
    real = slot < np.minimum(lens, length)
    pick = batch.offsets[:-1] + np.floor(rng.random(n) * np.maximum(lens, 1)).astype(np.int64)
    items = batch.items[np.minimum(pick, max(batch.items.size - 1, 0))] if batch.items.size \
        else np.zeros(n, np.int64)
    dummy = m + rng.integers(0, length, size=n)
    out: IntArray = np.where(real, items, dummy).astype(np.int64)
    return out


def support_probabilities(inner: FrequencyOracle) -> tuple[float, float]:
    """(p, q): the chance a report supports its own value, and another value (GRR, OLH)."""
    p = float(inner.p)  # type: ignore[attr-defined]
    q = 1.0 / inner.g if inner.mechanism == "olh" else float(inner.q)  # type: ignore[attr-defined]
    return p, q


def ps_variance(p: float, q: float, length: int, n: int, frequency: float) -> float:
    r"""Variance of a padded-sampling estimate :math:`l\,\hat f_{inner}(x)`.

    A device holding x (with :math:`|v| \le l`) supports x with probability
    :math:`r_1 = q + (p - q)/l`, any other device with :math:`q`, so for a fixed
    population with a fraction f holding x

    .. math:: \mathrm{Var}[\hat f(x)] = \frac{l^2}{n (p-q)^2}
              \bigl(f\, r_1 (1 - r_1) + (1 - f)\, q (1 - q)\bigr).

    Exact when every set has at most l items; for holders with larger sets
    :math:`r_1` is smaller and the formula is an approximation.

    >>> round(ps_variance(0.5, 0.25, 1, 100, 0.0), 6)  # l = 1: the plain oracle
    0.03
    """
    r1 = q + (p - q) / length
    return length**2 / (n * (p - q) ** 2) * (frequency * r1 * (1 - r1)
                                             + (1 - frequency) * q * (1 - q))


def choose_inner(*, epsilon: float, size: int, length: int, inner: str = "auto") -> FrequencyOracle:
    """The oracle that reports a padded sample over ``size`` values (items + dummies).

    ``inner="grr"``: GRR at the amplified ε' (:func:`amplified_epsilon`);
    ``"olh"``: OLH at ε (no amplification, see the module docstring);
    ``"auto"``: whichever has the smaller variance at f = 0.
    """
    from ..registry import make_frequency_oracle

    if inner not in (*INNER_ORACLES, "auto"):
        raise ParameterError(f"inner must be one of {[*INNER_ORACLES, 'auto']}, got {inner!r}")
    eps_amp = amplified_epsilon(epsilon, length)
    grr = make_frequency_oracle("grr", epsilon=eps_amp, domain_size=size)
    if inner == "grr":
        return grr
    olh = make_frequency_oracle("olh", epsilon=epsilon, domain_size=size)
    if inner == "olh":
        return olh
    return grr if grr.variance(1) <= olh.variance(1) else olh


class SetValued:
    """Mixin of mechanisms whose devices hold a *set* of items of ``[0, domain_size)``.

    ``perturb_sets(sets, rng)`` is the device-side entry point; ``perturb(values)``
    treats each integer value as a singleton set.
    """

    domain_size: int

    def perturb_sets(self, sets: Any, rng: np.random.Generator | int | None = None) -> Reports:
        """Perturb a batch of sets (see :meth:`SetBatch.from_any`) into reports."""
        batch = SetBatch.from_any(sets, self.domain_size)
        return self._perturb_batch(batch, as_rng(rng))

    def _perturb_batch(self, batch: SetBatch, rng: np.random.Generator) -> Reports:
        raise NotImplementedError


def check_candidates(candidates: Any, domain_size: int, name: str = "candidates") -> list[int]:
    """A non-empty list of distinct item indices in ``[0, domain_size)``."""
    if (not isinstance(candidates, (list, tuple)) or not candidates
            or len(candidates) > domain_size):
        raise ParameterError(f"{name} must be a non-empty list of distinct item indices in "
                             f"[0, {domain_size})")
    out = [check_int(f"{name}[{i}]", c, low=0, high=domain_size - 1)
           for i, c in enumerate(candidates)]
    if len(set(out)) != len(out):
        raise ParameterError(f"{name} must be distinct item indices")
    return out


def check_itemsets(itemsets: Any, domain_size: int) -> list[list[int]]:
    """A non-empty list of distinct itemsets, each a non-empty sorted list of distinct items."""
    if not isinstance(itemsets, (list, tuple)) or not itemsets:
        raise ParameterError("itemsets must be a non-empty list of itemsets (lists of item "
                             f"indices in [0, {domain_size}))")
    out = []
    for i, its in enumerate(itemsets):
        items = check_candidates(its, domain_size, name=f"itemsets[{i}]")
        out.append(sorted(items))
    if len({tuple(x) for x in out}) != len(out):
        raise ParameterError("itemsets must be distinct")
    return out
