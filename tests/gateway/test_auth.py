"""The authenticator hook and the throttle of failed authentications (no servers)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import pytest

from gateway.auth import AuthError, DeviceKeys, FailureThrottle, FirstOf, client_address
from gateway.config import parse_keys


@dataclass
class Head:
    headers: dict[bytes, bytes] = field(default_factory=dict)
    method: bytes = b"POST"
    path: bytes = b"/v1/reports"
    client: str = "192.0.2.1"


KEYS = DeviceKeys(parse_keys("a:key-a,b:key-b", "LDP_GATEWAY_KEYS"))


@pytest.mark.parametrize("headers,fleet", [
    ({b"authorization": b"Bearer key-a"}, "a"),
    ({b"authorization": b"bearer   key-b "}, "b"),
    ({b"x-ldp-key": b"key-a"}, "a"),
    ({b"authorization": b"Basic eA==", b"x-ldp-key": b"key-b"}, "b"),
])
def test_device_keys_name_the_fleet(headers: dict[bytes, bytes], fleet: str) -> None:
    assert KEYS.authenticate(Head(headers)) == fleet


@pytest.mark.parametrize("headers,status,reason", [
    ({}, 401, "missing_key"),
    ({b"authorization": b"Bearer "}, 401, "missing_key"),
    ({b"authorization": b"Bearer nope"}, 403, "wrong_key"),
    ({b"x-ldp-key": b"KEY-A"}, 403, "wrong_key"),
])
def test_device_keys_refuse_with_401_or_403(headers: dict[bytes, bytes], status: int,
                                            reason: str) -> None:
    with pytest.raises(AuthError) as err:
        KEYS.authenticate(Head(headers))
    assert (err.value.status, err.value.reason) == (status, reason)


class Tokens:
    """Stands for another scheme (e.g. Privacy Pass): it reads its own header."""

    headers = frozenset({b"authorization"})

    def authenticate(self, head: Head) -> object:
        value = head.headers.get(b"authorization", b"")
        if not value.startswith(b"PrivateToken "):
            raise AuthError(401, "missing_token", "no token")
        if value != b"PrivateToken token=good":
            raise AuthError(403, "bad_token", "bad token")
        return {"token": "good"}


def test_first_of_lets_each_scheme_answer_for_its_own_credential() -> None:
    both = FirstOf([Tokens(), KEYS])
    assert both.headers == {b"authorization", b"x-ldp-key"}
    assert both.authenticate(Head({b"authorization": b"PrivateToken token=good"})) == {
        "token": "good"}
    assert both.authenticate(Head({b"x-ldp-key": b"key-b"})) == "b"
    with pytest.raises(AuthError) as err:
        both.authenticate(Head({b"authorization": b"PrivateToken token=bad"}))
    assert err.value.reason == "bad_token"       # a wrong token is not tried as a key
    with pytest.raises(AuthError) as err:
        both.authenticate(Head())
    assert err.value.status == 401


def test_the_throttle_allows_a_burst_then_the_rate_per_address() -> None:
    now = [0.0]
    t = FailureThrottle(burst=3, rate=0.5, clock=lambda: now[0])
    assert not t.active and t.wait("a") == 0
    for _ in range(3):
        assert t.wait("a") == 0
        t.failed("a")
    assert t.wait("a") == pytest.approx(2.0)     # one failure back in 1 / 0.5 s
    assert t.retry_after(t.wait("a")) == 2
    assert t.wait("b") == 0                        # other addresses are not affected
    now[0] += 2.0
    assert t.wait("a") == 0
    t.failed("a")
    assert t.wait("a") > 0
    assert t.throttled == 3 and t.failures == 4
    now[0] += 100.0
    t.prune()                                      # a full bucket is forgotten
    assert not t.active


def test_the_throttle_remembers_a_bounded_number_of_addresses() -> None:
    t = FailureThrottle(burst=1, rate=1.0, max_addresses=100, clock=lambda: 0.0)
    for i in range(1000):
        t.failed(f"10.0.{i // 256}.{i % 256}")
    assert len(t.buckets) == 100
    assert "10.0.3.231" in t.buckets and "10.0.0.0" not in t.buckets   # the oldest go first


def test_the_client_address_behind_trusted_proxies_and_ipv6_prefixes() -> None:
    nets = (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("fd00::/8"))
    assert client_address("10.0.0.2", b"198.51.100.7", nets) == "198.51.100.7"
    assert client_address("10.0.0.2", b"198.51.100.7, 10.9.9.9", nets) == "198.51.100.7"
    assert client_address("10.0.0.2", None, nets) == "10.0.0.2"
    assert client_address("198.51.100.1", b"10.0.0.3", nets) == "198.51.100.1"  # no proxy
    assert client_address("10.0.0.2", b"10.0.0.3, 10.0.0.4", nets) == "10.0.0.3"
    assert client_address("2001:db8::1", None, ()) == client_address("2001:db8::ffff", None, ())
    assert client_address("::ffff:192.0.2.9", None, ()) == "192.0.2.9"
