"""The failover harness's verdict: Redis = what was acknowledged + a subset of what is in
doubt, cell for cell, however many messages are in doubt."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ldpcore.collection import CollectionSpec, encode_message
from ldpcore.message import MessageDecoder
from ldpctl.failover import Outcome, check_counted

SPEC = CollectionSpec.from_dict({"id": "fo", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                 "domain": {"kind": "integers", "low": 0, "high": 15}})


def _messages(count: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    oracle = SPEC.oracle()
    sizes = (1, 16, 64)
    return [encode_message(SPEC, oracle.perturb(rng.integers(0, 16, sizes[i % 3]), rng=rng),
                           "binary") for i in range(count)]


def _state(values: list[bytes]) -> Any:
    decoder, state = MessageDecoder(SPEC), SPEC.oracle().new_state()
    for v in values:
        state += decoder.aggregate(v)
    return state


def test_sixty_messages_in_doubt_of_which_some_were_counted_are_decided() -> None:
    acked, doubt = _messages(40, 1), _messages(60, 2)
    counted = [doubt[i] for i in (3, 17, 18, 44, 58)]
    outcomes = ([Outcome(v, "kafka", "acked") for v in acked]
                + [Outcome(v, "kafka", "doubt") for v in doubt])
    summary = check_counted(SPEC, outcomes, _state(acked + counted))
    assert summary["doubt"] == 60 and summary["doubt_counted"] == 5


def test_a_message_counted_twice_is_refused() -> None:
    acked, doubt = _messages(10, 3), _messages(30, 4)
    outcomes = ([Outcome(v, "kafka", "acked") for v in acked]
                + [Outcome(v, "kafka", "doubt") for v in doubt])
    with pytest.raises(AssertionError, match="no subset"):
        check_counted(SPEC, outcomes, _state(acked + [acked[2]]))


def test_an_acknowledged_message_missing_is_refused() -> None:
    acked = _messages(10, 5)
    outcomes = [Outcome(v, "kafka", "acked") for v in acked]
    with pytest.raises(AssertionError, match="acknowledged reports were lost"):
        check_counted(SPEC, outcomes, _state(acked[1:]))


def test_hundreds_in_doubt_of_which_a_few_reports_were_counted_are_decided() -> None:
    # After a leader kill: 600 messages in doubt (1, 16 or 64 reports each), three
    # one-report messages of them counted.  Those that alone overshoot are left out first.
    acked, doubt = _messages(20, 6), _messages(600, 7)
    counted = [doubt[i] for i in (0, 3, 597)]  # sizes[i % 3] == 1
    outcomes = ([Outcome(v, "kafka", "acked") for v in acked]
                + [Outcome(v, "kafka", "doubt") for v in doubt])
    summary = check_counted(SPEC, outcomes, _state(acked + counted))
    assert summary["doubt"] == 600 and summary["doubt_counted"] == 3
