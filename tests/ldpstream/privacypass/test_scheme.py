"""ldpstream.privacypass.scheme: windows, challenges and key records of our token scheme."""

from __future__ import annotations

import hashlib

import pytest

from ldpstream.privacypass.scheme import (
    KeyRecord,
    PPKeys,
    challenge,
    env_issuer_name,
    redemption_context,
    window_of,
)
from ldpstream.privacypass.tokens import TokenChallenge
from ldpstream.settings import ConfigError

from ...producer.standins import V


def test_windows_start_at_multiples_of_their_length() -> None:
    assert window_of(1_800_000_599.9, 600) == 1_800_000_000
    assert window_of(1_800_000_600, 600) == 1_800_000_600


def test_the_redemption_context_binds_collection_and_window() -> None:
    ctx = redemption_context("os", 600)
    assert ctx == hashlib.sha256(b"ldpstream-token-v1" + b"\x00os\x00" + b"600").digest()
    assert ctx != redemption_context("os", 1200) != redemption_context("os2", 600)
    ch = challenge("iss", "os", 600)
    assert TokenChallenge.decode(ch.encode()) == ch
    assert ch.origin_info == b"os" and ch.issuer_name == b"iss"


def test_a_key_record_round_trips_and_a_bad_key_is_refused() -> None:
    rec = KeyRecord("os", 600, 600, V["token_key"])
    assert rec.end == 1200 and len(rec.key_id) == 32
    assert KeyRecord.from_json(rec.to_json()) == rec
    assert KeyRecord.of("os", 600, 600, rec.spki) == rec
    with pytest.raises(Exception):  # noqa: B017 - whatever the SPKI parser raises
        KeyRecord.from_json(KeyRecord("os", 600, 600, "AAAA").to_json())


def test_key_names_share_one_slot_on_a_cluster() -> None:
    single, sharded = PPKeys("p:"), PPKeys("p:", sharded=True)
    assert single.public("os", 600) == "p:pp:pk:os:600"
    assert sharded.secret("os", 600).startswith("p:{pp}")
    assert sharded.spent("os", 600, b"\x01") == "p:{pp}spent:os:600:01"
    assert single.quota("dev", "os", 600) == "p:pp:q:dev:os:600"


def test_the_issuer_name_is_printable_ascii_without_spaces() -> None:
    assert env_issuer_name({}) == "ldpstream"
    assert env_issuer_name({"LDP_TOKEN_ISSUER_NAME": "acme"}) == "acme"
    with pytest.raises(ConfigError, match="LDP_TOKEN_ISSUER_NAME"):
        env_issuer_name({"LDP_TOKEN_ISSUER_NAME": "a b"})
