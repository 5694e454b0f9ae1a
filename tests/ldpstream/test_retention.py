"""ldpstream.retention: what the janitor asks the broker to release, and its refusals.

The janitor against real brokers and Redis is in tests/integration/test_retention.py."""

from __future__ import annotations

import pytest

from ldpstream.retention import Janitor, release_offsets


def test_release_offsets_stop_at_each_watermark_plus_one_and_skip_what_did_not_move() -> None:
    wms = {0: 99, 1: -1, 2: 5, 3: 0}
    assert release_offsets(wms, {}) == {0: 100, 2: 6, 3: 1}
    assert release_offsets(wms, {0: 100, 2: 6, 3: 1}) == {}
    # never below what was already released, never above the watermark
    assert release_offsets({0: 120}, {0: 100}) == {0: 121}
    assert release_offsets({0: 90}, {0: 100}) == {}


def test_janitor_refuses_a_bad_interval_or_topic() -> None:
    with pytest.raises(ValueError, match="interval"):
        Janitor(bootstrap="127.0.0.1:1", redis=None, interval=-1)
    with pytest.raises(ValueError, match="topic"):
        Janitor(bootstrap="127.0.0.1:1", redis=None, topic="")


def test_janitor_told_the_broker_cannot_release_never_asks_it() -> None:
    # redis=None: release_records would fail on the first Redis read if it tried
    janitor = Janitor(bootstrap="127.0.0.1:1", redis=None, release_records=False)
    assert janitor.release_records() == {}
    assert janitor.stats.releases_supported is False
