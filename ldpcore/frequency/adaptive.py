"""Choosing a frequency oracle by analytic variance and communication cost."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from .._bounds import EPSILON_MAX_64, EPSILON_MIN, EXACT_EPSILON_MAX_64, integer_in, real_in
from .._validate import check_epsilon, check_int
from ..base import FrequencyOracle
from ..errors import ParameterError

__all__ = ["CANDIDATES", "compare", "recommend", "make_adaptive", "Adaptive"]

CANDIDATES: tuple[str, ...] = ("grr", "olh", "oue", "ss", "hr", "hrr", "hcms", "cms", "sue", "blh")


def _rank(row: dict[str, Any]) -> tuple[float, int]:
    return (round(float(row["variance"]), 12), int(row["report_bits"]))


def compare(*, epsilon: float, domain_size: int) -> list[dict[str, Any]]:
    """Variance at f = 0 (for n = 1) and report size in bits of every candidate, best first."""
    from ..registry import make_frequency_oracle

    lo, hi = Adaptive.epsilon_bounds
    eps = check_epsilon(epsilon, low=lo, high=hi, context="for mechanism 'adaptive'")
    dlo, dhi = Adaptive.domain_size_bounds
    d = check_int("domain_size", domain_size, low=dlo, high=dhi)
    rows = []
    for name in CANDIDATES:
        try:
            oracle = make_frequency_oracle(name, epsilon=eps, domain_size=d)
        except ParameterError:
            continue  # e.g. a state that would not fit at this (d, ε)
        rows.append({"mechanism": name, "variance": oracle.variance(1),
                     "report_bits": oracle.report_bits, "spec": oracle.spec})
    if not rows:  # pragma: no cover - grr accepts every (ε, d) in the ranges above
        raise ParameterError(f"no candidate mechanism accepts epsilon={eps}, domain_size={d}")
    rows.sort(key=_rank)
    return rows


def recommend(*, epsilon: float, domain_size: int, max_report_bits: int | None = None) -> str:
    r"""The mechanism with the least variance at f = 0, among those within a report budget.

    Ties (OLH and OUE share :math:`4e^\varepsilon/(e^\varepsilon-1)^2` up to the
    rounding of g) go to the smaller report.  Among GRR, OUE and OLH this is the
    classic rule of Wang et al. (2017), GRR when :math:`d < 3e^\varepsilon + 2`;
    subset selection, optimal between the two regimes (Ye & Barg 2018), wins
    where its variance is lower, at a d-bit report.

    >>> recommend(epsilon=1.0, domain_size=4)
    'grr'
    >>> recommend(epsilon=1.0, domain_size=1024) in {"olh", "oue", "ss"}
    True
    >>> recommend(epsilon=1.0, domain_size=1024, max_report_bits=16)
    'olh'
    """
    rows = compare(epsilon=epsilon, domain_size=domain_size)
    if max_report_bits is not None:
        budget = check_int("max_report_bits", max_report_bits, low=1)
        rows = [r for r in rows if r["report_bits"] <= budget]
        if not rows:
            smallest = min(r["report_bits"]
                           for r in compare(epsilon=epsilon, domain_size=domain_size))
            raise ParameterError(f"no mechanism fits max_report_bits={budget}; allowed: an "
                                 f"integer >= {smallest}")
    # Within 2 % of the best variance, prefer the cheaper report.
    best = rows[0]["variance"]
    close = [r for r in rows if r["variance"] <= best * 1.02]
    return str(min(close, key=lambda r: r["report_bits"])["mechanism"])


class Adaptive:
    """The registry's ``adaptive`` entry: builds the :func:`recommend`-ed oracle.

    Not a mechanism of its own (the oracle it builds has the concrete mechanism's spec),
    but it declares the ranges it accepts like one.

    >>> make_adaptive(epsilon=1.0, domain_size=4).mechanism
    'grr'
    """

    mechanism: ClassVar[str] = "adaptive"
    epsilon_bounds: ClassVar[tuple[float, float]] = (EPSILON_MIN, EPSILON_MAX_64)
    domain_size_bounds: ClassVar[tuple[int, int]] = (2, 1 << 24)
    parameter_ranges: ClassVar[Mapping[str, str]] = {
        "epsilon": real_in(epsilon_bounds), "domain_size": integer_in(domain_size_bounds),
        "max_report_bits": "integer >= the smallest candidate's report"}

    @classmethod
    def exact_epsilon_max(cls) -> float:
        return EXACT_EPSILON_MAX_64

    def __call__(self, *, epsilon: float, domain_size: int,
                 max_report_bits: int | None = None) -> FrequencyOracle:
        from ..registry import make_frequency_oracle

        name = recommend(epsilon=epsilon, domain_size=domain_size,
                         max_report_bits=max_report_bits)
        return make_frequency_oracle(name, epsilon=epsilon, domain_size=domain_size)


make_adaptive = Adaptive()
"""Build the :func:`recommend`-ed oracle; its spec names the concrete mechanism."""
