"""Device cadence (one report per window), memoization policies and the device store."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpcore.collection import CollectionSpec, decode_message
from ldpcore.reference import PermanentWords, perturb_reference
from producer.sdk import Device
from producer.store import FileStore, MemoryStore, StoreError

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
    dev = Device(spec, test_only_rng=np.random.default_rng(1))
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
        dev = Device(spec, store=MemoryStore(), test_only_rng=np.random.default_rng(seed))
        answers = [_answer(spec, dev.message("bravo", now=T0 + 60 * w)) for w in range(200)]
        z = int(dev.permanent("bravo").columns["y"][0])
        # Reports vary, and concentrate on the permanent z: it is kept w.p. p1 = 0.475, any
        # other value is sent w.p. q1 = 0.175 (threshold: 5 binomial s.d. above 200 q1).
        assert len(set(answers)) > 1
        counts = np.bincount(answers, minlength=4)
        assert counts[z] > 200 * tl.q1 + 5 * np.sqrt(200 * tl.q1 * (1 - tl.q1))
    # Without a seed every new device has a new secret from OS entropy: at ε∞ = 4 an answer
    # is the true value w.p. 0.95, so 200 new devices all agreeing has probability ~4e-5.
    firsts = {int(Device(spec, store=MemoryStore()).permanent("bravo").columns["y"][0])
              for _ in range(200)}
    assert len(firsts) > 1


def test_the_default_store_is_a_private_file_under_the_user_data_dir(
        _private_user_data_dir: Path) -> None:
    dev = Device(SPEC)
    first = dev.message("delta", now=T0)
    path = _private_user_data_dir / "ldpstream" / "device-store.json"
    assert isinstance(dev.store, FileStore) and dev.store.path == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    again = Device(SPEC)                                         # the app restarts
    assert again.message("delta", now=T0 + 10) is None          # cadence remembered
    assert again.message("delta", now=T0 + 60) == first         # the same answer
    doc = json.loads(path.read_text())
    assert set(doc) >= {"format", "version", "secret", "collections", "outbox"}
    # Nothing in the store names the value or the answer: only the secret and the cadence.
    assert doc["collections"] == {SPEC.fingerprint: {"collection": "t", "window": T0 + 60,
                                                     "sent": 1}}
    assert "delta" not in path.read_text() and "answers" not in path.read_text()


def test_a_restart_gives_the_same_permanent_answer_for_every_value(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "s.json")
    spec = _spec(oracle={"mechanism": "oue", "epsilon": 1.0}, window_seconds=60)
    first = {v: Device(spec, store=store).report(v) for v in LABELS}
    for _ in range(5):
        restarted = FileStore(tmp_path / "s.json")
        assert all(Device(spec, store=restarted).report(v) == first[v] for v in LABELS)


def test_the_permanent_answer_is_the_hmac_derivation_of_the_vectors() -> None:
    secret = bytes(range(32))
    dev = Device(SPEC, store=MemoryStore(), secret=secret)
    want = perturb_reference(SPEC.oracle(), [2], PermanentWords(secret, SPEC.fingerprint, 2))
    assert dev.report("charlie") == want
    other = Device(_spec(id="u"), store=MemoryStore(), secret=secret)
    # another collection (fingerprint) and another secret: independent answers
    assert other.permanent("charlie") == perturb_reference(
        other.oracle, [2], PermanentWords(secret, other.spec.fingerprint, 2))


def test_collections_share_a_store(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "store.json")
    other = _spec(id="u")
    a, b = Device(SPEC, store=store), Device(other, store=store)
    ma, mb = a.message("alpha", now=T0), b.message("bravo", now=T0)
    doc = json.loads(store.path.read_text())
    assert set(doc["collections"]) == {SPEC.fingerprint, other.fingerprint}
    assert Device(SPEC, store=store).message("alpha", now=T0 + 60) == ma
    assert Device(other, store=store).message("bravo", now=T0 + 60) == mb


def test_two_level_derives_the_same_permanent_answer_after_a_restart(tmp_path: Path) -> None:
    spec = _spec(memoization="two-level", epsilon_1=1.0)
    path = tmp_path / "store.json"
    first = Device(spec, store=FileStore(path)).permanent("alpha")
    assert Device(spec, store=FileStore(path)).permanent("alpha") == first


@pytest.mark.parametrize("text,match", [
    ("not json", "is not JSON"),
    ('{"format": "other"}', "is not a ldpstream-device-store v1 document"),
    ('{"format": "ldpstream-device-memo", "version": 1, "collections": {}}',
     "memo file of SDK 0.1"),
    ('{"format": "ldpstream-device-store", "version": 1, "outbox": {}}', "'outbox'"),
])
def test_corrupt_stores_are_refused_not_silently_replaced(tmp_path: Path, text: str,
                                                          match: str) -> None:
    path = tmp_path / "store.json"
    path.write_text(text)
    with pytest.raises(StoreError, match=match):
        Device(SPEC, store=FileStore(path)).message("alpha", now=T0)
    assert path.read_text() == text


def test_an_int_seed_makes_a_device_reproducible_without_repeating_draws() -> None:
    spec = _spec(memoization="none")
    a = [Device(spec, store=MemoryStore(), test_only_rng=9).message(v, now=T0) for v in LABELS]
    b = [Device(spec, store=MemoryStore(), test_only_rng=9).message(v, now=T0) for v in LABELS]
    assert a == b
    dev = Device(spec, test_only_rng=9)
    answers = [_answer(spec, dev.message("alpha", now=T0 + 60 * w)) for w in range(30)]
    assert len(set(answers)) > 1


def test_memo_path_names_the_store_file(tmp_path: Path) -> None:
    path = tmp_path / "app" / "store.json"
    first = Device(SPEC, memo_path=path).message("bravo", now=T0)
    assert json.loads(path.read_text())["format"] == "ldpstream-device-store"
    assert Device(SPEC, store=FileStore(path)).message("bravo", now=T0 + 60) == first
    with pytest.raises(ValueError, match="not both"):
        Device(SPEC, memo_path=path, store=MemoryStore())
