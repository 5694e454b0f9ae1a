"""The answers of one state share their level-free parts (query_api.parts.SHARED):
keyed by the state's content, bounded by the cache they live in, same answers as without."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import ldpcore
from query_api import estimates as E
from query_api import parts as P
from query_api.cache import ByteLRU, size_of_state
from query_api.choices import Choices


@pytest.fixture
def memo() -> Iterator[ByteLRU]:
    cache = ByteLRU(64 << 20, getsizeof=size_of_state)
    token = P.SHARED.set(cache)
    yield cache
    P.SHARED.reset(token)


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
    token = P.SHARED.set(None)
    alone = {c: _freqs(o, s, c) for c in (0.8, 0.95, 0.99)}
    P.SHARED.reset(token)
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
    token = P.SHARED.set(None)
    fresh = _freqs(o, s2, 0.9, Choices().slot("k"))
    P.SHARED.reset(token)
    assert a2["estimates"] == fresh["estimates"] != a1["estimates"]
    # One part per state (beside them, the shape's kept bootstrap errors: "spread").
    assert sum(k[0] == "part" for k in memo._data) == 2
    # Equal counts under another object: the same key (content, not identity).
    copy = ldpcore.State(s2.fingerprint, s2.n, s2.counts.copy())
    assert P.state_digest(copy) == P.state_digest(s2) != P.state_digest(s1)


def test_parts_are_bounded_by_their_cache_in_bytes() -> None:
    o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=64)
    cache = ByteLRU(300_000, getsizeof=size_of_state)  # room for a few 200 x 64 parts
    token = P.SHARED.set(cache)
    try:
        for k in range(8):
            _freqs(o, o.sample_state(_zipf(64), 20_000, rng=10 + k), 0.95)
    finally:
        P.SHARED.reset(token)
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


@pytest.mark.integration
def test_a_flush_rereads_only_its_window_and_the_sum_is_the_whole_state(
        redis_server: Any) -> None:
    import asyncio
    import time
    import uuid

    import redis
    import redis.asyncio as aredis
    from prometheus_client import CollectorRegistry

    from ldpcore.collection import CollectionSpec
    from query_api.config import ApiSettings
    from query_api.metrics import ApiMetrics
    from query_api.service import Service
    from query_api.store import Store

    from .states import register, write_window

    prefix = f"sp{uuid.uuid4().hex[:8]}:"
    spec = CollectionSpec.from_dict({
        "id": "win", "oracle": {"mechanism": "olh", "epsilon": 1.0},
        "domain": {"kind": "integers", "low": 0, "high": 63}, "window_seconds": 3600,
        "min_reports": 1})
    o = spec.oracle()
    sync = redis.Redis.from_url(redis_server.url)
    register(sync, prefix, spec)
    hour = int(time.time()) // 3600 * 3600
    starts = [hour - 2 * 3600, hour - 3600, hour]
    for k, start in enumerate(starts):
        write_window(sync, prefix, spec, start, o.sample_state(_zipf(64), 3000, rng=k))

    async def run() -> None:
        client = aredis.Redis.from_url(redis_server.url)
        settings = ApiSettings(redis_url=redis_server.url, redis_prefix=prefix)
        store = Store(client, prefix)
        svc = Service(settings, store, ApiMetrics(CollectorRegistry()))
        read: list[list[int]] = []
        inner = store.window_states

        async def spy(spec_: Any, which: list[int]) -> Any:
            read.append(list(which))
            return await inner(spec_, which)

        store.window_states = spy  # type: ignore[method-assign]
        try:
            v1 = await store.version(spec, None, None)
            s1 = await svc.state(spec, v1, None, None)
            # A flush into the newest window: a new version; only that window is read.
            write_window(sync, prefix, spec, hour, o.sample_state(_zipf(64), 500, rng=9))
            v2 = await store.version(spec, None, None)
            s2 = await svc.state(spec, v2, None, None)
            whole = await store.state(spec, v2)  # every window read again, summed
            assert read == [starts, [hour]]
            assert s2.n == whole.n == s1.n + 500
            assert np.array_equal(s2.counts, whole.counts)
        finally:
            svc.close()
            await client.aclose()

    asyncio.run(run())
    sync.close()


def test_range_answers_of_one_state_share_its_curves(memo: ByteLRU) -> None:
    # CDF, quantiles and histogram at any level: the consistent fit is made once per state.
    o = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=64)
    s = o.sample_state(_zipf(64), 50_000, rng=3)

    def answers() -> list[dict[str, object]]:
        return [f(o, s, confidence=c) for c in (0.8, 0.95)
                for f in (E.cdf, E.histogram,
                          lambda o, s, confidence: E.quantiles(o, s, [0.5, 0.9],
                                                               confidence=confidence))]

    token = P.SHARED.set(None)
    alone = answers()
    P.SHARED.reset(token)
    assert answers() == alone and alone[0] != alone[3]  # the level matters
    kinds = sorted((k[1], k[4]) for k in memo._data)  # (curve, (method,)) per state
    assert kinds == [("cdf", ("consistent",)), ("cdf", ("unbiased",)),
                     ("leaves", ("consistent",)), ("leaves", ("unbiased",))]


def test_a_kept_choice_keeps_its_bootstrap_errors_for_nearby_states(memo: ByteLRU) -> None:
    # Under a live stream every flush is a new state: within the choice's factor the
    # shape's simulated errors are reused (rescaled, and said); beyond it, simulated again.
    o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=64)
    f = _zipf(64)
    s1 = o.sample_state(f, 50_000, rng=3)
    slot = Choices(factor=1.25).slot("k")
    first = _freqs(o, s1, 0.9, slot)
    assert "simulation" not in first["method_choice"]  # type: ignore[operator]
    if first["method"] == "base":
        pytest.skip("auto kept base: analytic, nothing simulated to keep")
    s2 = s1 + o.sample_state(f, 1_000, rng=4)
    near = _freqs(o, s2, 0.9, slot)
    said = near["method_choice"]["simulation"]  # type: ignore[index]
    assert said["errors_simulated_at_n"] == 50_000 and "rescaled" in said["refresh"]
    token = P.SHARED.set(None)
    fresh = _freqs(o, s2, 0.9, Choices().slot("k"))
    P.SHARED.reset(token)
    assert [r["estimate"] for r in near["estimates"]] == [  # type: ignore[union-attr]
        r["estimate"] for r in fresh["estimates"]]  # type: ignore[union-attr]
    widths = [(a["ci_high"] - a["ci_low"]) / (b["ci_high"] - b["ci_low"])
              for a, b in zip(near["estimates"], fresh["estimates"], strict=True)  # type: ignore[arg-type]
              if b["ci_high"] > b["ci_low"]]
    assert abs(float(np.median(widths)) - 1.0) < 0.1
    s3 = s2 + o.sample_state(f, 20_000, rng=5)  # n up by 1.39: beyond the factor
    far = _freqs(o, s3, 0.9, slot)
    assert "simulation" not in far["method_choice"]  # type: ignore[operator]
    s4 = s3 + o.sample_state(f, 1_000, rng=6)  # near s3 now: s3's errors, not s1's
    assert far["method_choice"]["chosen_at_n"] == s3.n  # type: ignore[index]
    assert _freqs(o, s4, 0.9, slot)["method_choice"]["simulation"][  # type: ignore[index]
        "errors_simulated_at_n"] == s3.n


def test_kept_errors_are_simulated_again_after_the_maximum_age(memo: ByteLRU) -> None:
    o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=64)
    f = _zipf(64)
    s1 = o.sample_state(f, 50_000, rng=3)
    choices = Choices(max_age_s=0.0)  # every kept spread is too old at once
    first = _freqs(o, s1, 0.9, choices.slot("k"))
    s2 = s1 + o.sample_state(f, 1_000, rng=4)
    again = _freqs(o, s2, 0.9, choices.slot("k"))
    assert "simulation" not in again["method_choice"]  # type: ignore[operator]
    assert first["method_choice"] is not None


@pytest.mark.parametrize("method", ["auto", "base", "power"])
def test_encoded_rows_are_the_bytes_of_the_dict_rows_at_every_level(
        memo: ByteLRU, method: str) -> None:
    # The routes' rows as JSON text (level-free heads kept, two columns per level) must
    # encode to the very bytes of the rows as dicts: labels with quotes and commas, no
    # labels, a top-k order, a bootstrap, an analytic and an EMS (no interval) answer.
    from query_api.service import encode

    o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=64)
    s = o.sample_state(_zipf(64), 20_000, rng=np.random.default_rng(3))
    labels = [f'v"{i}",\\ é' for i in range(64)]
    slot = Choices().slot(("k",))
    for c in (0.95, 0.9, 0.5123, 0.999):
        for lab in (labels, None):
            for top in (None, 5):
                args = dict(labels=lab, method=method, confidence=c, top=top,
                            n_effective=float(s.n), choice=slot)
                plain = E.frequencies(o, s, **args)  # type: ignore[arg-type]
                spliced = E.frequencies(o, s, encoded=True, **args)  # type: ignore[arg-type]
                assert isinstance(spliced["estimates"], E.EncodedRows)
                assert encode(spliced) == encode(plain)
                assert spliced["estimates"].rows() == plain["estimates"]
    sw = ldpcore.make_oracle("sw", epsilon=1.0, bins=32)
    x = (np.arange(32) + 0.5) / 32
    st = sw.sample_state(x / x.sum(), 5_000, rng=np.random.default_rng(4))
    for top in (None, 3):
        plain = E.frequencies(sw, st, labels=None, method="auto", confidence=0.9, top=top)
        assert encode(E.frequencies(sw, st, labels=None, method="auto", confidence=0.9,
                                    top=top, encoded=True)) == encode(plain)


def test_top_items_share_their_level_free_ranking_and_equal_the_unshared(
        memo: ByteLRU) -> None:
    from query_api import bench
    from query_api import setvalued as SV

    o = bench._spec("ps-shared", "ps").oracle()
    rng = np.random.default_rng(5)
    states = [bench._state(bench._spec("ps-shared", "ps"), "ps", 20_000, rng)
              for _ in range(2)]
    for s in states:
        for c in (0.95, 0.9, 0.61):
            shared = SV.top_items(o, s, 10, labels=None, confidence=c)
            token = P.SHARED.set(None)
            try:
                alone = SV.top_items(o, s, 10, labels=None, confidence=c)
            finally:
                P.SHARED.reset(token)
            assert shared == alone
    # One ranking per state (and k), not one per level.
    assert sum(1 for key in memo._data if key[:2] == ("part", "top_items")) == 2


def test_range_and_mean_answers_share_their_level_free_parts_and_equal_the_unshared(
        memo: ByteLRU) -> None:
    hh = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=64)
    s = hh.sample_state(_zipf(64), 20_000, rng=np.random.default_rng(6))
    sw = ldpcore.make_oracle("sw", epsilon=1.0, bins=32)
    x = (np.arange(32) + 0.5) / 32
    t = sw.sample_state(x / x.sum(), 5_000, rng=np.random.default_rng(7))
    asks = [lambda c, m=m: E.range_answer(hh, s, 3, 40, confidence=c, method=m,
                                          n_effective=15_000.0)
            for m in ("unbiased", "consistent")]
    asks.append(lambda c: E.mean(sw, t, confidence=c))
    for ask in asks:
        for c in (0.95, 0.8, 0.5):
            shared = ask(c)
            token = P.SHARED.set(None)
            try:
                assert shared == ask(c)
            finally:
                P.SHARED.reset(token)
    made = {key[1] for key in memo._data if key[0] == "part"}
    assert {"range", "mean"} <= made
    assert sum(1 for key in memo._data if key[:2] == ("part", "range")) == 2


def test_an_attributes_sub_state_is_made_once_per_state_and_named_by_its_version(
        memo: ByteLRU) -> None:
    from query_api import bench
    from query_api.routes.attributes import _per_attribute

    spec = bench._spec("multi-shared", "multi")
    o = spec.oracle()
    s = bench._state(spec, "multi", 20_000, np.random.default_rng(8))

    def ask(c: float) -> dict[str, Any]:
        def fn(sub: Any, part: ldpcore.State, ne: float) -> dict[str, Any]:
            return E.frequencies(sub, part, labels=None, method="auto", confidence=c,
                                 n_effective=ne)
        return _per_attribute("a", fn)(o, s, float(s.n))

    token = P.STATE_KEY.set((s, ("version", "multi-shared", 1)))
    try:
        answers = [ask(c) for c in (0.95, 0.9, 0.7)]
    finally:
        P.STATE_KEY.reset(token)
    alone = P.SHARED.set(None)
    try:
        assert answers == [ask(c) for c in (0.95, 0.9, 0.7)]
    finally:
        P.SHARED.reset(alone)
    keys = list(memo._data)
    assert sum(1 for k in keys if k[:2] == ("part", "attribute-state")) == 1
    # The sub-state's parts are named by the version and the attribute (no hash of counts).
    assert any(k[0] == "part" and k[3] == (("version", "multi-shared", 1), "attribute", "a")
               for k in keys)
