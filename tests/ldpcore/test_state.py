"""ldpcore.State: additive, comparable, and round-trips through bytes."""

from __future__ import annotations

import numpy as np
import pytest

import ldpcore
from ldpcore.errors import StateError


def test_states_add_count_by_count() -> None:
    o = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=4)
    a = o.aggregate(o.perturb([0, 1, 2], rng=1))
    b = o.aggregate(o.perturb([3, 3], rng=2))
    s = a + b
    assert s.n == 5 and (s.counts == a.counts + b.counts).all()
    c = a.copy()
    c += b
    assert c == s and a.n == 3  # += works on the copy


def test_bytes_round_trip_and_short_bytes_are_a_state_error() -> None:
    o = ldpcore.make_oracle("oue", epsilon=1.0, domain_size=8)
    s = o.aggregate(o.perturb(np.arange(8), rng=3))
    assert ldpcore.State.from_bytes(s.to_bytes()) == s
    with pytest.raises(StateError, match="too short"):
        ldpcore.State.from_bytes(b"\x00")


def test_states_of_different_oracles_do_not_add() -> None:
    a = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=4).new_state()
    b = ldpcore.make_oracle("grr", epsilon=2.0, domain_size=4).new_state()
    with pytest.raises(StateError):
        a + b
