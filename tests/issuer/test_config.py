"""issuer.config: ``LDP_…`` variables of the issuer, each failing naming itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from issuer.config import IssuerSettings
from ldpstream.settings import ConfigError

OPEN = {"LDP_ISSUER_OPEN": "true"}


def test_an_issuer_without_fleet_keys_must_say_it_is_open() -> None:
    with pytest.raises(ConfigError, match="LDP_ISSUER_KEYS"):
        IssuerSettings.from_env({})
    s = IssuerSettings.from_env(OPEN)
    assert s.attester_name.startswith("OPEN") and s.port == 8090


def test_keys_come_from_the_variable_and_the_file(tmp_path: Path) -> None:
    f = tmp_path / "keys"
    f.write_text("fleet2:k2\n")
    s = IssuerSettings.from_env({"LDP_ISSUER_KEYS": "fleet1:k1",
                                 "LDP_ISSUER_KEYS_FILE": str(f)})
    assert not s.attester_name.startswith("OPEN")


@pytest.mark.parametrize(("key", "value"), [
    ("LDP_ISSUER_PORT", "70000"), ("LDP_TOKEN_SKEW_SECONDS", "-1"),
    ("LDP_ISSUER_PREFETCH_WINDOWS", "99"), ("LDP_TOKEN_ISSUER_NAME", "a b"),
])
def test_a_bad_value_names_its_variable(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        IssuerSettings.from_env({**OPEN, key: value})
