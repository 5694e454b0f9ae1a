"""``ldpcore.message.decode_group``: a (collection, window) group of messages decoded once
into ``Decoded`` values that say everything the worker does with them (pure, no servers).

The reference is the worker's contract restated message by message
(tests/message_cases.py ``reference_outcome``): the group's good state is the sum of
the good messages' states, and every other message is one dead letter with the
reference's reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ldpcore.message import Decoded, MessageDecoder, decode_group
from tests.message_cases import mutate, reference_outcome, specs, valid_message

SPECS = specs()
BY_ID = {s.id: s for s in SPECS}


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("fmt", ["binary", "json"])
def test_a_group_decodes_to_the_reference_outcome_of_each_message(seed: int, fmt: str) -> None:
    rng = np.random.default_rng(seed)
    spec = SPECS[seed % len(SPECS)]
    values: list[Any] = []
    for _ in range(24):
        value = valid_message(spec, rng, fmt)
        if rng.random() < 0.4:
            other = valid_message(SPECS[int(rng.integers(0, len(SPECS)))], rng, fmt)
            value = mutate(value, rng, other)
        values.append(value)
    values.append(None)  # a tombstone
    out = decode_group(MessageDecoder(spec), spec.id, 3600, values)
    ref = [reference_outcome(BY_ID, spec.id.encode(), v if v is not None else b"")
           for v in values]
    good = [r.state for r in ref if r.reason is None and r.state is not None and r.state.n]
    bad = [(i, r.reason) for i, r in enumerate(ref) if r.reason is not None]
    states = [d for d in out if not d.dead]
    if good:
        (total,) = states
        assert total.state == sum(good[1:], good[0]) and total.reports == total.state.n
        assert out[0] is total  # the good state first, then the dead letters in order
    else:
        assert states == []
    assert [(d.index, d.reason) for d in out if d.dead] == bad
    assert all(d.collection == spec.id and d.window == 3600 for d in out)
    assert all(d.error and d.reports >= 1 for d in out if d.dead)


def test_an_unknown_collection_dead_letters_every_message_after_its_envelope_checks() -> None:
    spec = BY_ID["f-grr"] if "f-grr" in BY_ID else SPECS[0]
    good = valid_message(spec, np.random.default_rng(1), "binary")
    out = decode_group(None, spec.id, 0, [good, b"junk", good])
    assert [(d.index, d.reason, d.reports) for d in out] == [
        (0, "unknown_collection", 1), (1, "garbage", 1), (2, "unknown_collection", 1)]


def test_a_dead_letter_counts_the_reports_its_message_says_it_holds() -> None:
    spec = SPECS[0]
    cut = valid_message(spec, np.random.default_rng(1), "binary", n=7)[:-1]
    (d,) = decode_group(MessageDecoder(spec), spec.id, 0, [cut])
    assert d.dead and d.reports == 7 and d.state is None


def test_an_exception_inside_a_mechanism_dead_letters_only_its_message(
        monkeypatch: pytest.MonkeyPatch) -> None:
    spec = SPECS[0]
    dec = MessageDecoder(spec)
    values = [valid_message(spec, np.random.default_rng(s), "binary", n=3) for s in range(3)]
    real = dec.oracle._aggregate
    calls = {"n": 0}

    def flaky(columns: dict[str, Any]) -> Any:
        calls["n"] += 1
        if calls["n"] in (1, 3):  # the whole batch, then the second message alone
            raise ZeroDivisionError("a bug")
        return real(columns)

    monkeypatch.setattr(dec.oracle, "_aggregate", flaky)
    out = decode_group(dec, spec.id, 0, values)
    assert [(d.dead, d.index, d.reason) for d in out] == [(False, -1, ""), (True, 1, "internal")]
    assert out[0].reports == 6 and "ZeroDivisionError" in out[1].error
    assert isinstance(out[0], Decoded)
