"""query_api.domain: times, labels and indices between the query string and a domain."""

from __future__ import annotations

import pytest

from ldpcore.collection import CollectionSpec
from query_api.domain import index_offset, index_value, labels_of, parse_time, to_index
from query_api.errors import QueryError

CATS = CollectionSpec.from_dict({"id": "os", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                 "domain": {"kind": "categories", "labels": ["a", "b"]}})
INTS = CollectionSpec.from_dict({"id": "n", "oracle": {"mechanism": "hh", "epsilon": 1.0},
                                 "domain": {"kind": "integers", "low": 10, "high": 73}})
BINS = CollectionSpec.from_dict({"id": "x", "oracle": {"mechanism": "sw", "epsilon": 1.0},
                                 "domain": {"kind": "interval", "low": 0, "high": 2,
                                            "bins": 4}})


@pytest.mark.parametrize(("raw", "want"), [
    (None, None), ("", None), ("now", 10_000.0), ("-90s", 9910.0), ("-1h", 6400.0),
    ("-2w", 10_000.0 - 14 * 86400), ("1234.5", 1234.5),
    ("1970-01-01T01:00:00Z", 3600.0), ("1970-01-01T01:00:00+01:00", 0.0),
    ("1970-02-30", 5_184_000.0),  # rolls over like timegm
])
def test_times_are_epoch_iso_now_or_relative(raw: str | None, want: float | None) -> None:
    assert parse_time(raw, "since", now=10_000.0) == want


@pytest.mark.parametrize("raw", ["yesterday", "inf", "-1y"])
def test_a_bad_time_is_a_400_naming_the_parameter(raw: str) -> None:
    with pytest.raises(QueryError) as err:
        parse_time(raw, "until", now=0.0)
    assert err.value.parameter == "until" and err.value.status == 400


def test_labels_of_each_domain_kind() -> None:
    assert labels_of(CATS) == ["a", "b"]
    assert labels_of(INTS)[:2] == ["10", "11"] and len(labels_of(INTS) or []) == 64
    assert labels_of(BINS) == ["[0, 0.5)", "[0.5, 1)", "[1, 1.5)", "[1.5, 2)"]


def test_values_map_to_indices_and_back() -> None:
    assert to_index(CATS, "b", "v") == 1 and index_value(CATS, 1) == "b"
    assert to_index(INTS, "15", "lo") == 5 and index_value(INTS, 5) == 15
    assert index_offset(INTS) == 10 and index_offset(CATS) == 0
    assert to_index(BINS, "1.2", "x") == 2 and index_value(BINS, 2) == 1.0
    with pytest.raises(QueryError, match="v must be a label of the collection") as err:
        to_index(CATS, "zz", "v")
    assert err.value.parameter == "v"
    with pytest.raises(QueryError, match=r"lo must be a number in \[10, 73\]"):
        to_index(INTS, "99", "lo")
