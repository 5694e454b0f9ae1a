"""ldpcore.wire: the versioned columnar batch format and its JSON records.

The framing around it (envelopes, fuzzing) is in tests/ldpcore/test_message.py."""

from __future__ import annotations

import numpy as np
import pytest

import ldpcore
from ldpcore import wire
from ldpcore.errors import ReportError

GRR = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=5)
OUE = ldpcore.make_oracle("oue", epsilon=1.0, domain_size=12)


@pytest.mark.parametrize("oracle", [GRR, OUE], ids=["grr", "oue"])
def test_a_batch_round_trips_through_bytes_and_records(oracle: ldpcore.FrequencyOracle) -> None:
    reports = oracle.perturb(np.arange(5).repeat(3), rng=1)
    data = wire.encode(reports)
    head = wire.peek(data)
    assert (head.mechanism, head.fingerprint, head.n) == (oracle.mechanism,
                                                          oracle.fingerprint, 15)
    back = wire.decode(oracle, data)
    assert oracle.aggregate(back) == oracle.aggregate(reports)
    recs = wire.to_records(reports)
    assert len(recs) == 15
    assert oracle.aggregate(wire.from_records(oracle, recs)) == oracle.aggregate(reports)


def test_the_count_sits_at_a_fixed_offset_after_the_oracles_prefix() -> None:
    data = wire.encode(GRR.perturb([0, 1, 2], rng=1))
    off = wire.count_offset(data)
    assert int.from_bytes(data[off:off + 4], "little") == 3
    assert data[:off] == wire.encode(GRR.perturb([4], rng=2))[:off]


@pytest.mark.parametrize(("mangle", "reason"), [
    (lambda d: b"XXXX" + d[4:], "garbage"),
    (lambda d: d[:2], "truncated"),
    (lambda d: d[:4] + b"\x63" + d[5:], "version"),
    (lambda d: d + b"\x00", "truncated"),
    (lambda d: d[:-1], "truncated"),
])
def test_damaged_bytes_are_report_errors_with_their_reason(mangle, reason: str) -> None:  # type: ignore[no-untyped-def]
    data = wire.encode(GRR.perturb([0, 1, 2], rng=1))
    with pytest.raises(ReportError) as err:
        wire.decode(GRR, mangle(data))
    assert err.value.reason == reason


def test_a_batch_of_another_oracle_names_what_differs() -> None:
    data = wire.encode(GRR.perturb([0], rng=1))
    with pytest.raises(ReportError) as err:
        wire.decode(OUE, data)
    assert err.value.reason == "mechanism"
    other = ldpcore.make_oracle("grr", epsilon=2.0, domain_size=5)
    with pytest.raises(ReportError) as err:
        wire.decode(other, data)
    assert err.value.reason == "fingerprint"


def test_records_that_do_not_fit_are_schema_or_range_errors() -> None:
    good = wire.to_records(GRR.perturb([0], rng=1))[0]
    with pytest.raises(ReportError) as err:
        wire.from_records(GRR, ["x"])  # type: ignore[list-item]
    assert err.value.reason == "schema"
    bad = {**good, "y": 7}
    with pytest.raises(ReportError) as err:
        wire.from_records(GRR, [bad])
    assert err.value.reason == "out_of_range"
