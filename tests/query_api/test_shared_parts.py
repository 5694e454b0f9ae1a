"""The answers of one state share their level-free parts (query_api.estimates.SHARED):
keyed by the state's content, bounded by the cache they live in, same answers as without."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest

import ldpcore
from query_api import estimates as E
from query_api.cache import ByteLRU, size_of_state
from query_api.choices import Choices


@pytest.fixture
def memo() -> Iterator[ByteLRU]:
    cache = ByteLRU(64 << 20, getsizeof=size_of_state)
    token = E.SHARED.set(cache)
    yield cache
    E.SHARED.reset(token)


def _zipf(d: int) -> np.ndarray:
    w = 1.0 / np.arange(1, d + 1) ** 1.2
    out: np.ndarray = w / w.sum()
    return out


def _freqs(o: ldpcore.FrequencyOracle, s: ldpcore.State, c: float,
           slot: object = None) -> dict[str, object]:
    return E.frequencies(o, s, labels=None, method="auto", confidence=c,
                         n_effective=float(s.n), choice=slot)  # type: ignore[arg-type]


def test_shared_answers_equal_the_unshared_ones_at_every_level(memo: ByteLRU) -> None:
    o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=64)
    s = o.sample_state(_zipf(64), 50_000, rng=3)
    token = E.SHARED.set(None)
    alone = {c: _freqs(o, s, c) for c in (0.8, 0.95, 0.99)}
    E.SHARED.reset(token)
    shared = {c: _freqs(o, s, c) for c in (0.8, 0.95, 0.99)}
    assert shared == alone
    assert alone[0.8]["estimates"] != alone[0.99]["estimates"]  # the level matters
    # One part for the three levels (and heavy hitters of the same state reuse it).
    assert len(memo) == 1
    E.heavy_hitters(o, s, 5, labels=None, confidence=0.9, n_effective=float(s.n))
    assert len(memo) == 1


def test_a_new_state_is_a_new_part_never_the_old_answer(memo: ByteLRU) -> None:
    # A flush adds reports: same fingerprint, new counts; the shared part must not be reused.
    o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=64)
    s1 = o.sample_state(_zipf(64), 50_000, rng=3)
    s2 = s1 + o.sample_state(_zipf(64)[::-1], 20_000, rng=4)
    slot = Choices().slot("k")
    a1 = _freqs(o, s1, 0.9, slot)
    a2 = _freqs(o, s2, 0.9, slot)  # n grew by 1.4: the choice is made again
    token = E.SHARED.set(None)
    fresh = _freqs(o, s2, 0.9, Choices().slot("k"))
    E.SHARED.reset(token)
    assert a2["estimates"] == fresh["estimates"] != a1["estimates"]
    assert len(memo) == 2
    # Equal counts under another object: the same key (content, not identity).
    copy = ldpcore.State(s2.fingerprint, s2.n, s2.counts.copy())
    assert E.state_digest(copy) == E.state_digest(s2) != E.state_digest(s1)


def test_parts_are_bounded_by_their_cache_in_bytes() -> None:
    o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=64)
    cache = ByteLRU(300_000, getsizeof=size_of_state)  # room for a few 200 x 64 parts
    token = E.SHARED.set(cache)
    try:
        for k in range(8):
            _freqs(o, o.sample_state(_zipf(64), 20_000, rng=10 + k), 0.95)
    finally:
        E.SHARED.reset(token)
    assert 0 < len(cache) < 8 and cache.currsize <= 300_000 and cache.evictions > 0


def test_one_thread_makes_a_part_the_others_wait_for_it() -> None:
    cache = ByteLRU(1 << 20, getsizeof=len)
    made: list[int] = []
    gate = threading.Event()

    def make() -> bytes:
        gate.wait(5)
        made.append(1)
        return b"part"

    got: list[bytes] = []
    threads = [threading.Thread(target=lambda: got.append(cache.get_or_make("k", make)))
               for _ in range(4)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert got == [b"part"] * 4 and made == [1]
