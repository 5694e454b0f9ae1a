"""The SDKs' perturbations pass ldpcore's own statistical checks.

Each SDK's batch tool (CSPRNG draws: not seedable) perturbs large batches, all of one SDK
in one process; Python decodes the messages with ldpcore and runs

* the ε audit of :func:`ldpcore.audit.audit` on a 3-value domain (as
  tests/ldpcore/test_audit.py): no likelihood ratio significantly above e^ε, the
  budget spent (the worst ratio consistent with e^ε), and an SDK run at 2ε caught;
* unbiasedness: every frequency estimate of n = 60,000 reports of a fixed population lies
  within z·sd of the truth, sd from the oracle's analytic ``variance(n, f)`` (for two-level
  collections the composed channel's), z Bonferroni-corrected over the d estimates; means
  of the numeric mechanisms within z·``mean_std_error``; PEM finds its planted heavy
  hitter.

Set-valued and multi-attribute collections (``ps``, ``psi``, ``setsize``, ``multi``): the ε
audit on three *sets* (or three attribute tuples) as the three inputs, one SDK run at 2ε
caught; unbiasedness of every item frequency (``ps``), itemset support (``psi``), raw size
estimate (``setsize``) against the population's, with the analytic variances of
:func:`ldpcore.setvalued.base.ps_variance` / the inner oracle (every set within the padding
length, where they are exact); for ``multi`` every attribute's frequencies and mean, each
from the n_j reports that sampled it, within the attribute's analytic variance at the
realised n_j plus the sampling term (:meth:`MultiAttribute.attribute_variance`).

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

from .conftest import SDKS, sdk_perturb_many

P_FAIL = 1e-6
EPS = 1.0
TRIALS = 40_000
N = 60_000
D = 16
BINS = 32
PEM_BITS, PEM_HOT = 16, 40_961

AUDITED = ["grr", "sue", "oue", "blh", "olh", "hr", "hrr", "ss", "cms", "hcms", "hh", "haar"]
LOUD = ["grr", "oue", "hrr"]
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
FREQUENCY_IDS = [f"{o['mechanism']}{'-2level' if e else ''}" for o, e in FREQUENCY]
NUMERIC = ["sw", "pm", "duchi"]


SET_D = 6
# Three inputs per audit: sets of items (set-valued) or attribute tuples (multi).
AUDIT_SETS = [[0], [1, 2], []]
SET_AUDITED: dict[str, dict[str, Any]] = {
    "ps-grr": {"mechanism": "ps", "length": 2, "inner": "grr"},
    "ps-olh": {"mechanism": "ps", "length": 2, "inner": "olh", "candidates": [0, 1, 2, 4]},
    "psi": {"mechanism": "psi", "length": 2, "itemsets": [[0], [1, 2], [3]]},
    "setsize": {"mechanism": "setsize", "max_size": 2, "inner": "grr"},
}
MULTI_AUDIT_DOMAIN = {"kind": "attributes", "attributes": [
    {"name": "a", "kind": "categories", "labels": ["x", "y", "z"]},
    {"name": "b", "kind": "integers", "low": 0, "high": 3}]}
MULTI_AUDIT_TUPLES = [[0, 0], [1, 3], [2, 1]]
SET_FREQUENCY: dict[str, dict[str, Any]] = {
    "ps-grr": {"mechanism": "ps", "epsilon": 2.0, "length": 3, "inner": "grr"},
    "ps-olh": {"mechanism": "ps", "epsilon": 2.0, "length": 3, "inner": "olh"},
    "psi": {"mechanism": "psi", "epsilon": 2.0, "length": 2,
            "itemsets": [[0, 1], [2], [1, 3], [4, 5]]},
    "setsize": {"mechanism": "setsize", "epsilon": 2.0, "max_size": 3},
}
MULTI_DOMAIN = {"kind": "attributes", "attributes": [
    {"name": "os", "kind": "categories", "labels": ["linux", "mac", "win", "bsd"]},
    {"name": "n", "kind": "integers", "low": 0, "high": 9},
    {"name": "age", "kind": "interval", "low": 0, "high": 80, "bins": 8}]}
MULTI_ORACLE = {"mechanism": "multi", "epsilon": 3.0, "sample": 2,
                "attributes": {"n": {"mechanism": "oue"}}, "pairs": [["os", "n"]]}


def _population_sets(n: int) -> list[list[int]]:
    """n sets of at most 3 of the SET_D items (the padding length): item x held with
    probability about (x + 1) / 10, sets capped at 3 items (fixed seed)."""
    rng = np.random.default_rng(7)
    member = rng.random((n, SET_D)) < (np.arange(SET_D) + 1) / 10
    return [np.flatnonzero(row)[:3].tolist() for row in member]


def _population_tuples(n: int) -> list[list[int]]:
    rng = np.random.default_rng(8)
    cols = []
    for a in MULTI_DOMAIN["attributes"]:
        size = len(a["labels"]) if "labels" in a else (a.get("bins") or a["high"] - a["low"] + 1)
        w = np.arange(1, size + 1, dtype=float) ** 2
        cols.append(rng.choice(size, size=n, p=w / w.sum()))
    return np.stack(cols, axis=1).tolist()


def _collection(oracle: dict[str, Any], domain: dict[str, Any],
                **extra: Any) -> CollectionSpec:
    return CollectionSpec.from_dict({"id": "sdk-stats", "oracle": oracle, "domain": domain,
                                     **extra})


def _population(d: int, n: int) -> list[int]:
    weights = np.arange(1, d + 1, dtype=float) ** 2
    counts = np.floor(weights / weights.sum() * n).astype(int)
    counts[-1] += n - counts.sum()
    return np.repeat(np.arange(d), counts).tolist()


def _requests() -> dict[str, tuple[CollectionSpec, list[Any]]]:
    three = {"kind": "integers", "low": 0, "high": 2}
    audit_values = [x for x in range(3) for _ in range(TRIALS)]
    out: dict[str, tuple[CollectionSpec, list[Any]]] = {}
    for mech in AUDITED:
        out[f"audit-{mech}"] = (_collection({"mechanism": mech, "epsilon": EPS}, three),
                                audit_values)
    for mech in LOUD:
        out[f"loud-{mech}"] = (_collection({"mechanism": mech, "epsilon": 2 * EPS}, three),
                               audit_values)
    for (oracle, extra), name in zip(FREQUENCY, FREQUENCY_IDS, strict=True):
        out[f"freq-{name}"] = (_collection(oracle, {"kind": "integers", "low": 0,
                                                    "high": D - 1}, **extra),
                               _population(D, N))
    for mech in NUMERIC:
        out[f"mean-{mech}"] = (_collection({"mechanism": mech, "epsilon": 1.0},
                                           {"kind": "interval", "low": -2.0, "high": 6.0,
                                            "bins": BINS}), _population(BINS, N))
    cats = {"kind": "categories", "labels": [f"i{i}" for i in range(SET_D)]}
    set_audit = [s for s in AUDIT_SETS for _ in range(TRIALS)]
    for name, oracle in SET_AUDITED.items():
        out[f"audit-{name}"] = (_collection({**oracle, "epsilon": EPS}, cats), set_audit)
    out["loud-ps"] = (_collection({**SET_AUDITED["ps-grr"], "epsilon": 2 * EPS}, cats),
                      set_audit)
    out["audit-multi"] = (_collection({"mechanism": "multi", "epsilon": EPS, "sample": 1},
                                      MULTI_AUDIT_DOMAIN),
                          [t for t in MULTI_AUDIT_TUPLES for _ in range(TRIALS)])
    for name, oracle in SET_FREQUENCY.items():
        out[f"sets-{name}"] = (_collection(oracle, cats), _population_sets(N))
    out["multi"] = (_collection(MULTI_ORACLE, MULTI_DOMAIN), _population_tuples(N))
    rng = np.random.default_rng(1)
    pem_values = np.where(np.arange(N) < 0.3 * N, PEM_HOT,
                          rng.integers(0, 2**PEM_BITS, N)).tolist()
    out["pem"] = (_collection({"mechanism": "pem", "epsilon": 4.0, "bits": PEM_BITS, "keep": 8,
                               "eta": 4},
                              {"kind": "integers", "low": 0, "high": 2**PEM_BITS - 1}),
                  pem_values)
    return out


_CACHE: dict[str, dict[str, tuple[CollectionSpec, list[Any], Reports]]] = {}


def _batch(sdk: str, key: str) -> tuple[CollectionSpec, list[Any], Reports]:
    """The SDK's reports of one request (every request of the SDK run once, together)."""
    if sdk not in _CACHE:
        reqs = _requests()
        outs = sdk_perturb_many(sdk, [(json.loads(s.to_json()), v) for s, v in reqs.values()])
        _CACHE[sdk] = {k: (s, v, decode_message(s, s.oracle(), msg)[1])
                       for (k, (s, v)), msg in zip(reqs.items(), outs, strict=True)}
    return _CACHE[sdk][key]


def _audit(batch: Reports, epsilon: float) -> Any:
    def perturb(vals: np.ndarray, rng: np.random.Generator) -> Reports:
        x = int(vals[0])  # the audit asks for TRIALS copies of one input at a time
        return batch[slice(x * TRIALS, (x + 1) * TRIALS)]

    return audit(perturb, epsilon=epsilon, domain_size=3, trials=TRIALS,
                 confidence=1 - P_FAIL)


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("mech", AUDITED)
def test_sdk_perturbation_satisfies_its_epsilon_and_spends_it(sdk: str, mech: str) -> None:
    result = _audit(_batch(sdk, f"audit-{mech}")[2], EPS)
    assert not result.violated, result
    assert result.tight, result


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("mech", LOUD)
def test_audit_catches_an_sdk_run_at_twice_epsilon(sdk: str, mech: str) -> None:
    result = _audit(_batch(sdk, f"loud-{mech}")[2], EPS)
    assert result.violated, result


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("name", FREQUENCY_IDS)
def test_sdk_frequency_estimates_are_unbiased(sdk: str, name: str) -> None:
    spec, values, reports = _batch(sdk, f"freq-{name}")
    est_oracle: Any = spec.estimation_oracle()
    est = est_oracle.estimate(spec.oracle().aggregate(reports))
    truth = np.bincount(values, minlength=D) / N
    sd = np.array([est_oracle.std_error(N, float(f)) for f in truth])
    z = stats.norm.isf(P_FAIL / (2 * D))
    assert np.all(np.abs(est - truth) < z * sd), (est - truth) / sd


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("mech", NUMERIC)
def test_sdk_numeric_means_are_unbiased(sdk: str, mech: str) -> None:
    spec, values, reports = _batch(sdk, f"mean-{mech}")
    o: Any = spec.oracle()
    truth = float(np.mean(-2.0 + (np.asarray(values) + 0.5) * 8.0 / BINS))
    assert abs(o.mean(o.aggregate(reports)) - truth) < (stats.norm.isf(P_FAIL / 2)
                                                        * o.mean_std_error(N))


@pytest.mark.parametrize("sdk", SDKS)
def test_sdk_pem_finds_the_planted_heavy_hitter(sdk: str) -> None:
    spec, values, reports = _batch(sdk, "pem")
    o: Any = spec.oracle()
    (value, freq, se), = o.heavy_hitters(o.aggregate(reports), 1)
    truth = float(np.mean(np.asarray(values) == PEM_HOT))
    assert value == PEM_HOT
    assert abs(freq - truth) < stats.norm.isf(P_FAIL / 2) * se


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("name", [*SET_AUDITED, "multi"])
def test_sdk_set_and_multi_perturbation_satisfies_its_epsilon_and_spends_it(
        sdk: str, name: str) -> None:
    result = _audit(_batch(sdk, f"audit-{name}")[2], EPS)
    assert not result.violated, result
    assert result.tight, result


@pytest.mark.parametrize("sdk", SDKS)
def test_audit_catches_an_sdk_set_oracle_run_at_twice_epsilon(sdk: str) -> None:
    assert _audit(_batch(sdk, "loud-ps")[2], EPS).violated


def _within(est: np.ndarray, truth: np.ndarray, sd: np.ndarray) -> None:
    z = stats.norm.isf(P_FAIL / (2 * est.size))
    assert np.all(np.abs(est - truth) < z * sd), (est - truth) / sd


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("name", list(SET_FREQUENCY))
def test_sdk_set_estimates_are_unbiased(sdk: str, name: str) -> None:
    spec, sets, reports = _batch(sdk, f"sets-{name}")
    o: Any = spec.oracle()
    st = o.aggregate(reports)
    member = np.zeros((N, SET_D), dtype=bool)
    for i, items in enumerate(sets):
        member[i, items] = True
    if o.mechanism == "ps":
        truth = member.mean(axis=0)
        est = o.estimate(st)
        sd = np.sqrt([o.variance(N, float(f)) for f in truth])
    elif o.mechanism == "psi":
        truth = np.array([member[:, its].all(axis=1).mean() for its in o.itemsets])
        est = o.itemset_support(st)[0]
        sd = np.sqrt([o.support_variance(N, float(f)) for f in truth])
    else:
        truth = np.bincount(o.sizes(sets), minlength=o.max_size + 1) / N
        est = o.raw_size_estimate(st)
        sd = np.sqrt([o.size_variance(N, float(f)) for f in truth])
    _within(est, truth, sd)


@pytest.mark.parametrize("sdk", SDKS)
def test_sdk_multi_attribute_estimates_are_unbiased(sdk: str) -> None:
    spec, rows, reports = _batch(sdk, "multi")
    o: Any = spec.oracle()
    st = o.aggregate(reports)
    vals = np.asarray(rows)
    n_j = o.attribute_counts(st)
    assert n_j.sum() == N * o.sample
    est, truth, sd = [], [], []
    for j, name in enumerate(o.attribute_names):
        if name == "age":  # a pm attribute: its mean (bin centres) within the analytic error
            centres = (vals[:, j] + 0.5) * 10.0
            spread = float(centres.var())
            est.append(o.attribute_mean(st, name))
            truth.append(float(centres.mean()))
            sd.append(np.sqrt(o.attribute_mean_variance(name, N, reports=int(n_j[j]),
                                                        spread=spread)))
            continue
        if name == "os*n":
            joint = vals[:, 0] * 10 + vals[:, 1]
            f = np.bincount(joint, minlength=40) / N
        else:
            f = np.bincount(vals[:, j], minlength=o.attribute(name).domain_size) / N
        est.extend(o.attribute_frequencies(st, name))
        truth.extend(f)
        sd.extend(np.sqrt(o.attribute_variance(name, N, float(x), reports=int(n_j[j])))
                  for x in f)
    _within(np.asarray(est), np.asarray(truth), np.asarray(sd))
