"""The mechanisms every generic ldpcore test runs over, with their small-domain params."""

from __future__ import annotations

from typing import Any

import ldpcore
from ldpcore.capabilities import FrequencyEstimates, MeanEstimates
from ldpcore.registry import mechanisms_with

# Frequency oracles built from (epsilon, domain_size) alone (numeric ones need an interval).
FREQUENCY_MECHANISMS = sorted(set(mechanisms_with(FrequencyEstimates))
                              - set(mechanisms_with(MeanEstimates)))

# Extra parameters where defaults would make a small-domain test meaningless or huge.
SMALL_PARAMS: dict[str, dict[str, Any]] = {"ps": {"length": 3}}  # amplified GRR

# Parameters for the unbiasedness/variance test where a mechanism's default
# post-processing makes variance(n, f) describe a different estimator.
STAT_PARAMS: dict[str, dict[str, Any]] = {"hh": {"consistency": False}, "ps": {"length": 3}}

# HaarHRR's leaf variance depends on the masses of the leaf's ancestors, not on its
# frequency alone; variance(n, f) is an upper bound, checked in tests/ldpcore/range.
NOT_F_ONLY_VARIANCE = {"haar"}


def available() -> list[str]:
    """Registered frequency mechanisms whose module is importable."""
    have = set(ldpcore.available_mechanisms())
    return [m for m in FREQUENCY_MECHANISMS if m in have]


def make(mechanism: str, *, epsilon: float, domain_size: int, small: bool = False,
         **params: Any) -> ldpcore.FrequencyOracle:
    """Build an oracle, adding the small-domain params when asked."""
    extra = dict(SMALL_PARAMS.get(mechanism, {})) if small else {}
    extra.update(params)
    return ldpcore.make_oracle(mechanism, epsilon=epsilon, domain_size=domain_size, **extra)


def assert_unbiased(oracle: ldpcore.FrequencyOracle, truth: Any, n: int, seed: int,
                    sds: float = 5.0) -> None:
    """Perturb ``n`` values drawn from ``truth`` and check every estimate within ``sds``
    standard deviations (the oracle's own analytic variance) of the population's frequency."""
    import numpy as np

    rng = np.random.default_rng(seed)
    values = rng.choice(len(truth), size=n, p=truth)
    f = np.bincount(values, minlength=len(truth)) / n
    est = oracle.estimate(oracle.aggregate(oracle.perturb(values, rng=rng)))
    sd = np.sqrt([oracle.variance(n, float(x)) for x in f])
    assert (np.abs(est - f) <= sds * sd).all(), (est, f, sd)
