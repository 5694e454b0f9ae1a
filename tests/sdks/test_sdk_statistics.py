"""The SDKs' perturbations pass ldpcore's own statistical checks.

Each SDK's batch tool (CSPRNG draws: not seedable) perturbs large batches; Python decodes
the messages with ldpcore and runs

* the ε audit of :func:`ldpcore.audit.audit` on a 3-value domain (as
  tests/ldpcore/test_privacy_audit.py): no likelihood ratio significantly above e^ε, and
  the budget spent (the worst ratio consistent with e^ε);
* unbiasedness: every frequency estimate of n = 60,000 reports of a fixed population lies
  within z·sd of the truth, sd from the oracle's analytic ``variance(n, f)`` (for two-level
  collections the composed channel's), z Bonferroni-corrected over the d estimates; means
  of the numeric mechanisms within z·``mean_std_error``; PEM finds its planted heavy
  hitter.

Every tolerance is set so that a correct SDK fails with probability about 1e-6 per test
(audit confidence 1 - 1e-6; z = Φ⁻¹(1 - 1e-6 / 2d)).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from scipy import stats

from ldpcore.audit import audit
from ldpcore.base import Reports
from ldpcore.collection import CollectionSpec, decode_message

from .conftest import SDKS, sdk_perturb

P_FAIL = 1e-6
EPS = 1.0
TRIALS = 40_000
N = 60_000

AUDITED = ["grr", "sue", "oue", "blh", "olh", "hr", "hrr", "ss", "cms", "hcms", "hh", "haar"]


def _collection(oracle: dict[str, Any], domain: dict[str, Any],
                **extra: Any) -> CollectionSpec:
    return CollectionSpec.from_dict({"id": "sdk-stats", "oracle": oracle, "domain": domain,
                                     **extra})


def _reports(sdk: str, spec: CollectionSpec, values: list[int]) -> Reports:
    served = json.loads(spec.to_json())
    return decode_message(spec, spec.oracle(), sdk_perturb(sdk, served, values))[1]


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("mech", AUDITED)
def test_sdk_perturbation_satisfies_its_epsilon_and_spends_it(sdk: str, mech: str) -> None:
    spec = _collection({"mechanism": mech, "epsilon": EPS},
                       {"kind": "integers", "low": 0, "high": 2})
    values = [x for x in range(3) for _ in range(TRIALS)]
    batch = _reports(sdk, spec, values)

    def perturb(vals: np.ndarray, rng: np.random.Generator) -> Reports:
        x = int(vals[0])  # the audit asks for TRIALS copies of one input at a time
        return batch[slice(x * TRIALS, (x + 1) * TRIALS)]

    result = audit(perturb, epsilon=EPS, domain_size=3, trials=TRIALS,
                   confidence=1 - P_FAIL)
    assert not result.violated, result
    assert result.tight, result


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("mech", ["grr", "oue", "hrr"])
def test_audit_catches_an_sdk_run_at_twice_epsilon(sdk: str, mech: str) -> None:
    spec = _collection({"mechanism": mech, "epsilon": 2 * EPS},
                       {"kind": "integers", "low": 0, "high": 2})
    batch = _reports(sdk, spec, [x for x in range(3) for _ in range(TRIALS)])
    result = audit(lambda v, rng: batch[slice(int(v[0]) * TRIALS, (int(v[0]) + 1) * TRIALS)],
                   epsilon=EPS, domain_size=3, trials=TRIALS, confidence=1 - P_FAIL)
    assert result.violated, result


def _population(d: int, n: int) -> list[int]:
    weights = np.arange(1, d + 1, dtype=float) ** 2
    counts = np.floor(weights / weights.sum() * n).astype(int)
    counts[-1] += n - counts.sum()
    return np.repeat(np.arange(d), counts).tolist()


FREQUENCY = [
    ({"mechanism": "grr", "epsilon": 1.0}, {}),
    ({"mechanism": "sue", "epsilon": 1.0}, {}),
    ({"mechanism": "oue", "epsilon": 1.0}, {}),
    ({"mechanism": "blh", "epsilon": 1.0}, {}),
    ({"mechanism": "olh", "epsilon": 2.0}, {}),
    ({"mechanism": "hr", "epsilon": 1.0}, {}),
    ({"mechanism": "hrr", "epsilon": 1.0}, {}),
    ({"mechanism": "ss", "epsilon": 1.0}, {}),
    ({"mechanism": "cms", "epsilon": 2.0}, {}),
    ({"mechanism": "hcms", "epsilon": 2.0, "m": 8}, {}),
    ({"mechanism": "hh", "epsilon": 1.0, "fanout": 4, "consistency": False}, {}),
    ({"mechanism": "haar", "epsilon": 1.0}, {}),
    ({"mechanism": "grr", "epsilon": 3.0}, {"memoization": "two-level", "epsilon_1": 1.0}),
    ({"mechanism": "oue", "epsilon": 3.0}, {"memoization": "two-level", "epsilon_1": 1.0}),
    ({"mechanism": "olh", "epsilon": 3.0}, {"memoization": "two-level", "epsilon_1": 1.5}),
    ({"mechanism": "hrr", "epsilon": 3.0}, {"memoization": "two-level", "epsilon_1": 1.0}),
]


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize(("oracle", "extra"), FREQUENCY,
                         ids=[f"{o['mechanism']}{'-2level' if e else ''}" for o, e in FREQUENCY])
def test_sdk_frequency_estimates_are_unbiased(sdk: str, oracle: dict[str, Any],
                                              extra: dict[str, Any]) -> None:
    d = 16
    spec = _collection(oracle, {"kind": "integers", "low": 0, "high": d - 1}, **extra)
    values = _population(d, N)
    est_oracle: Any = spec.estimation_oracle()
    state = spec.oracle().aggregate(_reports(sdk, spec, values))
    est = est_oracle.estimate(state)
    truth = np.bincount(values, minlength=d) / N
    sd = np.array([est_oracle.std_error(N, float(f)) for f in truth])
    z = stats.norm.isf(P_FAIL / (2 * d))
    assert np.all(np.abs(est - truth) < z * sd), (est - truth) / sd


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("mech", ["sw", "pm", "duchi"])
def test_sdk_numeric_means_are_unbiased(sdk: str, mech: str) -> None:
    bins = 32
    spec = _collection({"mechanism": mech, "epsilon": 1.0},
                       {"kind": "interval", "low": -2.0, "high": 6.0, "bins": bins})
    values = _population(bins, N)
    o: Any = spec.oracle()
    state = o.aggregate(_reports(sdk, spec, values))
    truth = float(np.mean(-2.0 + (np.asarray(values) + 0.5) * 8.0 / bins))
    assert abs(o.mean(state) - truth) < stats.norm.isf(P_FAIL / 2) * o.mean_std_error(N)


@pytest.mark.parametrize("sdk", SDKS)
def test_sdk_pem_finds_the_planted_heavy_hitter(sdk: str) -> None:
    bits, hot = 16, 40_961
    spec = _collection({"mechanism": "pem", "epsilon": 4.0, "bits": bits, "keep": 8, "eta": 4},
                       {"kind": "integers", "low": 0, "high": 2**bits - 1})
    rng = np.random.default_rng(1)
    values = np.where(np.arange(N) < 0.3 * N, hot, rng.integers(0, 2**bits, N)).tolist()
    o: Any = spec.oracle()
    (value, freq, se), = o.heavy_hitters(o.aggregate(_reports(sdk, spec, values)), 1)
    truth = float(np.mean(np.asarray(values) == hot))
    assert value == hot
    assert abs(freq - truth) < stats.norm.isf(P_FAIL / 2) * se
