"""Attesters: the default fleet key + device credential, the app-login example, plugging one
in by name (the token-request body parser under fuzzing: tests/issuer/test_service.py)."""

from __future__ import annotations

import pytest

from issuer.attest import AppLoginAttester, AttestationError, FleetKeyAttester, load_attester
from issuer.config import IssuerSettings
from ldpstream.privacypass.client import device_credential
from ldpstream.settings import ConfigError, parse_keys


def test_fleet_key_attester_counts_devices_not_requests() -> None:
    att = FleetKeyAttester(parse_keys("app:k1", "x"))
    a = {"authorization": "Bearer k1", "x-ldp-device": device_credential(b"s1" * 8)}
    b = {"x-ldp-key": "k1", "x-ldp-device": device_credential(b"s2" * 8)}
    assert att.attest(a) == att.attest(dict(a)) != att.attest(b)
    for headers, reason in (({"x-ldp-device": a["x-ldp-device"]}, "missing_key"),
                            ({**a, "authorization": "Bearer k2"}, "wrong_key"),
                            ({"authorization": "Bearer k1"}, "missing_device"),
                            ({"authorization": "Bearer k1", "x-ldp-device": "AAAA"},
                             "bad_device")):
        with pytest.raises(AttestationError) as exc:
            att.attest(headers)
        assert exc.value.reason == reason


def test_app_login_attester_one_account_one_device() -> None:
    secret = b"0123456789abcdef-app"
    att = AppLoginAttester(secret, now=1000.0)
    tok = AppLoginAttester.session_token(secret, "alice", 2000)
    one = att.attest({"authorization": f"Bearer {tok}"})
    assert one == att.attest({"x-ldp-key": tok})
    assert one != att.attest({"authorization":
                              f"Bearer {AppLoginAttester.session_token(secret, 'bob', 2000)}"})
    for bad, reason in ((AppLoginAttester.session_token(b"other-secret-xxxx", "alice", 2000),
                         "wrong_key"),
                        (AppLoginAttester.session_token(secret, "alice", 999), "expired"),
                        ("garbage", "wrong_key")):
        with pytest.raises(AttestationError) as exc:
            att.attest({"authorization": f"Bearer {bad}"})
        assert exc.value.reason == reason


def test_attester_is_pluggable_by_name_and_bad_names_fail_at_start() -> None:
    env = {"LDP_ISSUER_ATTESTER": "issuer.attest:app_login",
           "LDP_ISSUER_APP_LOGIN_SECRET": "0123456789abcdef-app"}
    s = IssuerSettings.from_env(env)
    assert isinstance(s.attester, AppLoginAttester)
    for spec in ("nomodule", "issuer.attest:nothing", "no.such.module:x"):
        with pytest.raises(ConfigError, match="LDP_ISSUER_ATTESTER"):
            load_attester(spec, {})
    with pytest.raises(ConfigError, match="LDP_ISSUER_KEYS"):
        IssuerSettings.from_env({})
    assert IssuerSettings.from_env({"LDP_ISSUER_OPEN": "true"}).attester_name.startswith("OPEN")
    with pytest.raises(ConfigError, match="LDP_TOKEN_ISSUER_NAME"):
        IssuerSettings.from_env({"LDP_ISSUER_OPEN": "true", "LDP_TOKEN_ISSUER_NAME": "a b"})
