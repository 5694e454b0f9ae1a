"""The level-free parts of answers are named by their state's content (or its version)."""

from __future__ import annotations

import numpy as np

import ldpcore
from query_api import parts
from query_api.cache import ByteLRU, size_of_state


def test_a_state_is_named_by_its_content_or_by_the_key_it_is_given() -> None:
    o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=16)
    a = o.sample_state(np.full(16, 1 / 16), 1_000, rng=np.random.default_rng(1))
    same = ldpcore.State(a.fingerprint, a.n, a.counts.copy())
    other = ldpcore.State(a.fingerprint, a.n, a.counts + 1)
    assert parts.state_digest(a) == parts.state_digest(same) != parts.state_digest(other)
    token = parts.STATE_KEY.set((a, ("version", 7)))
    try:
        assert parts.state_digest(a) == ("version", 7)
        assert parts.state_digest(same) != ("version", 7)  # only the state it names
    finally:
        parts.STATE_KEY.reset(token)


def test_a_part_is_made_once_per_state_while_shared_and_each_time_when_not() -> None:
    o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=16)
    s = o.sample_state(np.full(16, 1 / 16), 1_000, rng=np.random.default_rng(2))
    made: list[int] = []

    def make() -> np.ndarray:
        made.append(1)
        return np.zeros(4)

    parts.shared("p", o, s, (1,), make)
    token = parts.SHARED.set(ByteLRU(1 << 20, getsizeof=size_of_state))
    try:
        first = parts.shared("p", o, s, (1,), make)
        assert parts.shared("p", o, s, (1,), make) is first
        assert parts.peek("p", o, s, (1,)) is first and parts.peek("p", o, s, (2,)) is None
    finally:
        parts.SHARED.reset(token)
    assert len(made) == 2


def test_an_oracles_fingerprint_is_kept_per_object_and_equals_its_own() -> None:
    a = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=16)
    b = ldpcore.make_oracle("olh", epsilon=2.0, domain_size=16)
    for _ in range(2):
        assert parts.fingerprint(a) == a.fingerprint != parts.fingerprint(b) == b.fingerprint


def test_by_identity_keeps_a_value_for_the_very_objects_and_the_latest_few() -> None:
    memo = parts.ByIdentity(2)
    made: list[str] = []

    def make(tag: str) -> str:
        made.append(tag)
        return tag

    a, equal_to_a, b, c = [1, 2], [1, 2], [3], [4]
    assert memo.get_or_make((a,), "x", lambda: make("a")) == "a"
    assert memo.get_or_make((a,), "x", lambda: make("again")) == "a"  # kept
    assert memo.get_or_make((equal_to_a,), "x", lambda: make("equal")) == "equal"  # not `is`
    assert memo.get_or_make((a,), "y", lambda: make("a-y")) == "a-y"  # another extra key
    memo.get_or_make((b,), "x", lambda: make("b"))
    memo.get_or_make((c,), "x", lambda: make("c"))
    assert memo.get_or_make((a,), "x", lambda: make("a2")) == "a2"  # evicted: size 2
    assert made == ["a", "equal", "a-y", "b", "c", "a2"]
