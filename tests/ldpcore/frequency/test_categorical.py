"""One-symbol oracles (GRR, HR): report layout, histogram state and simulated states."""

from __future__ import annotations

import numpy as np
import pytest

import ldpcore
from ldpcore.frequency.categorical import CategoricalOracle


@pytest.mark.parametrize(("mech", "outputs"), [("grr", 1000), ("hr", 1024)])
def test_reports_are_one_symbol_and_the_state_is_their_histogram(mech: str,
                                                                  outputs: int) -> None:
    o = ldpcore.make_oracle(mech, epsilon=1.0, domain_size=1000)
    assert isinstance(o, CategoricalOracle) and o.output_size == outputs
    (col,) = o.report_columns
    assert (col.name, col.low, col.high) == ("y", 0, outputs - 1)
    st = o.aggregate(o.perturb(np.arange(1000) % 7, rng=3))
    assert st.counts.shape == (outputs,) and int(st.counts.sum()) == 1000


@pytest.mark.parametrize("mech", ["grr", "hr"])
def test_simulated_states_follow_the_output_law(mech: str) -> None:
    o = ldpcore.make_oracle(mech, epsilon=1.0, domain_size=6)
    dist = np.array([0.4, 0.3, 0.1, 0.1, 0.1, 0.0])
    draws = o.sample_counts(dist, 2000, size=400, rng=5)
    assert draws.shape == (400, o.output_size) and np.all(draws.sum(axis=1) == 2000)
    # Mean of Multinomial(n, P) is nP; 400 draws: a few standard errors of the mean.
    probs = o._output_probs(dist) / o._output_probs(dist).sum()
    sd = np.sqrt(2000 * probs * (1 - probs) / 400)
    assert np.all(np.abs(draws.mean(axis=0) - 2000 * probs) <= 5 * sd + 1e-9)
