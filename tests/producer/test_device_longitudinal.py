"""Device cadence (one report per window), memoization policies and memo persistence."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpcore.collection import CollectionSpec, decode_message
from producer.sdk import Device

LABELS = ["alpha", "bravo", "charlie", "delta"]
BASE = {"id": "t", "oracle": {"mechanism": "grr", "epsilon": 0.5},
        "domain": {"kind": "categories", "labels": LABELS}, "window_seconds": 60}
SPEC = CollectionSpec.from_dict(BASE)
T0 = 1_800_000_000.0  # a window start (multiple of 60)


def _spec(**extra: Any) -> CollectionSpec:
    return CollectionSpec.from_dict({**BASE, **extra})


def _answer(spec: CollectionSpec, msg: bytes | None) -> int:
    assert msg is not None
    _, rep = decode_message(spec, spec.oracle(), msg)
    return int(rep.columns["y"][0])


def test_device_sends_at_most_one_report_per_window() -> None:
    dev = Device(SPEC)
    assert dev.message("alpha", now=T0) is not None
    assert not dev.can_report(now=T0 + 30)
    assert dev.message("alpha", now=T0 + 30) is None
    assert dev.message("bravo", now=T0 + 59.9) is None  # another value: still the same window
    assert dev.message("alpha", now=T0 + 60) is not None
    assert dev.message("alpha", now=T0 + 61) is None


def test_cadence_follows_the_spec_and_the_clock() -> None:
    clock = {"t": T0}
    dev = Device(_spec(reports_per_window=2), clock=lambda: clock["t"])
    sent = [dev.message("alpha") for _ in range(3)]
    assert [m is not None for m in sent] == [True, True, False]
    clock["t"] += 60
    assert dev.message("alpha") is not None


def test_permanent_memoization_repeats_the_answer_across_windows() -> None:
    dev = Device(SPEC)
    answers = {_answer(SPEC, dev.message("charlie", now=T0 + 60 * w)) for w in range(40)}
    assert len(answers) == 1


def test_no_memoization_draws_a_fresh_answer_every_window() -> None:
    spec = _spec(memoization="none")
    dev = Device(spec, rng=np.random.default_rng(1))
    answers = [_answer(spec, dev.message("charlie", now=T0 + 60 * w)) for w in range(40)]
    # GRR at ε = 0.5, d = 4 keeps the value w.p. 0.35: 40 identical answers ~ 1e-18.
    assert len(set(answers)) > 1


@pytest.mark.slow
def test_two_level_rerandomizes_a_permanent_answer() -> None:
    spec = _spec(oracle={"mechanism": "grr", "epsilon": 4.0}, memoization="two-level",
                 epsilon_1=1.0)
    tl = spec.two_level()
    assert tl is not None
    for seed in range(20):
        dev = Device(spec, rng=np.random.default_rng(seed))
        answers = [_answer(spec, dev.message("bravo", now=T0 + 60 * w)) for w in range(200)]
        (z,) = {int(r.columns["y"][0]) for r in dev.memo.values()}
        # Reports vary, and concentrate on the memoized z: it is kept w.p. p1 = 0.475, any
        # other value is sent w.p. q1 = 0.175 (threshold: 5 binomial s.d. above 200 q1).
        assert len(set(answers)) > 1
        counts = np.bincount(answers, minlength=4)
        assert counts[z] > 200 * tl.q1 + 5 * np.sqrt(200 * tl.q1 * (1 - tl.q1))
    # Without a seed the permanent answers come from OS entropy: at ε∞ = 4 an answer is the
    # true value w.p. 0.95, so 200 unseeded devices all agreeing has probability ~4e-5.
    firsts = set()
    for _ in range(200):
        dev = Device(spec)
        dev.message("bravo", now=T0)
        firsts.add(int(next(iter(dev.memo.values())).columns["y"][0]))
    assert len(firsts) > 1


def test_memo_and_cadence_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "state" / "memo.json"
    dev = Device(SPEC, memo_path=path)
    first = dev.message("delta", now=T0)
    assert path.exists() and stat.S_IMODE(path.stat().st_mode) == 0o600
    again = Device(SPEC, memo_path=path)
    assert again.message("delta", now=T0 + 10) is None          # cadence remembered
    assert again.message("delta", now=T0 + 60) == first         # answer remembered
    assert again.memo == dev.memo


def test_collections_share_a_memo_file(tmp_path: Path) -> None:
    path = tmp_path / "memo.json"
    other = _spec(id="u")
    a, b = Device(SPEC, memo_path=path), Device(other, memo_path=path)
    ma, mb = a.message("alpha", now=T0), b.message("bravo", now=T0)
    doc = json.loads(path.read_text())
    assert set(doc["collections"]) == {SPEC.fingerprint, other.fingerprint}
    assert Device(SPEC, memo_path=path).message("alpha", now=T0 + 60) == ma
    assert Device(other, memo_path=path).message("bravo", now=T0 + 60) == mb


def test_two_level_memo_persists_the_permanent_answer(tmp_path: Path) -> None:
    spec = _spec(memoization="two-level", epsilon_1=1.0)
    path = tmp_path / "memo.json"
    dev = Device(spec, memo_path=path)
    dev.message("alpha", now=T0)
    assert Device(spec, memo_path=path).memo == dev.memo


def _memo_doc(entry: dict[str, Any]) -> str:
    return json.dumps({"format": "ldpstream-device-memo", "version": 1,
                       "collections": {SPEC.fingerprint: entry}})


@pytest.mark.parametrize("text,match", [
    ("not json", "cannot read memo file"),
    ('{"format": "other"}', "is not a ldpstream-device-memo v1 file"),
    (_memo_doc({"answers": {"9": {}}, "window": None, "sent": 0}),
     "bad entry for collection 't'"),
    (_memo_doc({"answers": {}, "window": "x", "sent": 0}), "window must be"),
])
def test_corrupt_memo_files_are_refused_not_silently_redrawn(tmp_path: Path, text: str,
                                                             match: str) -> None:
    path = tmp_path / "memo.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        Device(SPEC, memo_path=path)


def test_an_int_seed_makes_a_device_reproducible_without_repeating_draws() -> None:
    spec = _spec(memoization="none")
    a = [Device(spec, rng=9).message(v, now=T0) for v in LABELS]
    b = [Device(spec, rng=9).message(v, now=T0) for v in LABELS]
    assert a == b
    dev = Device(spec, rng=9)
    answers = [_answer(spec, dev.message("alpha", now=T0 + 60 * w)) for w in range(30)]
    assert len(set(answers)) > 1
