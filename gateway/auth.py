"""Who may post: the authenticator hook, called once a request's head is complete, and the
throttle of failed authentications per client address.

The server calls :meth:`Authenticator.authenticate` with the parsed head (method, path,
the headers the authenticator asked for, the client address) *before* it reads any byte
of the body or sends ``100 Continue``.  It returns a principal (kept with the request:
the fleet of a device key, a token's claims) or raises :class:`AuthError` (401/403).
Device keys are :class:`DeviceKeys`; another scheme (Privacy Pass ``Authorization:
PrivateToken …``) is another authenticator, or several chained by
:class:`FirstOf`.

Failed authentications are throttled per client address (:class:`FailureThrottle`: a
token bucket of ``burst`` failures refilled at ``rate`` per second).  An address whose
bucket is empty gets 429 with ``Retry-After`` before its key is even looked at, so
guessing costs the guesser time, not the gateway work.  Valid keys are not slowed: the
check is one dictionary lookup while some address has failures (none otherwise), a
connection that has proved its key once is never throttled, and other addresses are not
affected.  The address is the peer's, or behind a trusted proxy
(``LDP_GATEWAY_TRUSTED_PROXIES``) the last untrusted hop of ``X-Forwarded-For``; IPv6
addresses are grouped by /64 (one host usually holds a whole /64).
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from .parse import BodyError

__all__ = ["AuthError", "Authenticator", "DeviceKeys", "FailureThrottle", "FirstOf",
           "RequestHead", "client_address"]

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class AuthError(BodyError):
    """The request is not authenticated: 401 (no credential) or 403 (a wrong one)."""


class RequestHead(Protocol):
    """What an authenticator sees of a request whose head is complete (no body yet)."""

    @property
    def method(self) -> bytes: ...

    @property
    def path(self) -> bytes: ...

    @property
    def headers(self) -> Mapping[bytes, bytes]:
        """Lower-case names → values, for the names of :attr:`Authenticator.headers`."""

    @property
    def client(self) -> str:
        """The client address as the throttle keys it."""


class Authenticator(Protocol):
    """The hook: ``authenticate(head) -> principal``, raising :class:`AuthError`."""

    headers: frozenset[bytes]
    """Lower-case names of the headers it reads (the server keeps only wanted headers)."""

    def authenticate(self, head: RequestHead) -> object: ...


class DeviceKeys:
    """Device API keys: ``Authorization: Bearer <key>`` or ``X-LDP-Key: <key>``.

    Parameters
    ----------
    keys : dict
        SHA-256 digest of a key → its fleet (:func:`gateway.config.parse_keys`).

    The principal is the fleet's name.
    """

    headers = frozenset({b"authorization", b"x-ldp-key"})

    def __init__(self, keys: Mapping[bytes, str]) -> None:
        self.keys = dict(keys)

    def authenticate(self, head: RequestHead) -> str:
        h = head.headers
        key: bytes | None = None
        authorization = h.get(b"authorization")
        if authorization is not None:
            scheme, _, token = authorization.strip().partition(b" ")
            if scheme.lower() == b"bearer" and token.strip():
                key = token.strip()
        if key is None:
            x_key = h.get(b"x-ldp-key")
            if x_key is not None and x_key.strip():
                key = x_key.strip()
        if key is None:
            raise AuthError(401, "missing_key", "this gateway needs a device key: "
                            "'Authorization: Bearer <key>' or 'X-LDP-Key: <key>'")
        fleet = self.keys.get(hashlib.sha256(key).digest())
        if fleet is None:
            raise AuthError(403, "wrong_key", "the device key is not one of this gateway's")
        return fleet


class FirstOf:
    """Several authenticators: the first one whose credential the request carries decides.

    Each is tried in order; a 401 (no credential of its kind) passes to the next, the
    first principal or 403 is the answer; all 401: the last 401.
    """

    def __init__(self, authenticators: Iterable[Authenticator]) -> None:
        self.chain = tuple(authenticators)
        if not self.chain:
            raise ValueError("FirstOf needs at least one authenticator")
        self.headers = frozenset().union(*(a.headers for a in self.chain))

    def authenticate(self, head: RequestHead) -> object:
        missing: AuthError | None = None
        for a in self.chain:
            try:
                return a.authenticate(head)
            except AuthError as exc:
                if exc.status != 401:
                    raise
                missing = exc
        assert missing is not None
        raise missing


class FailureThrottle:
    """Failed authentications per client address: a token bucket per address.

    Parameters
    ----------
    burst : int
        Failures an address may have at once.
    rate : float
        Failures per second it earns back.
    max_addresses : int
        Addresses remembered at most (the oldest are forgotten first).
    """

    def __init__(self, *, burst: int, rate: float, max_addresses: int = 100_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if burst < 1 or rate <= 0:
            raise ValueError("burst must be >= 1 and rate > 0")
        self.burst, self.rate, self.max_addresses, self.clock = burst, rate, max_addresses, clock
        self.buckets: dict[str, tuple[float, float]] = {}  # address → (tokens, at)
        self.throttled = 0
        """Requests refused for this (the metric ``ldp_gateway_auth_throttled_total``)."""
        self.failures = 0

    def _tokens(self, addr: str, now: float) -> float:
        tokens, at = self.buckets.get(addr, (float(self.burst), now))
        return min(float(self.burst), tokens + (now - at) * self.rate)

    def wait(self, addr: str) -> float:
        """Seconds until ``addr`` may try again (0: now).  Counts a refusal if > 0."""
        if addr not in self.buckets:
            return 0.0
        now = self.clock()
        tokens = self._tokens(addr, now)
        if tokens >= 1.0:
            return 0.0
        self.throttled += 1
        return (1.0 - tokens) / self.rate

    def retry_after(self, wait: float) -> int:
        """``Retry-After`` seconds for a wait (whole seconds, at least 1)."""
        return max(1, math.ceil(wait))

    def failed(self, addr: str) -> None:
        """Record one failed authentication of ``addr``."""
        self.failures += 1
        now = self.clock()
        tokens = self._tokens(addr, now) - 1.0
        self.buckets.pop(addr, None)   # re-inserted last: the dict stays oldest-first
        self.buckets[addr] = (tokens, now)
        while len(self.buckets) > self.max_addresses:
            del self.buckets[next(iter(self.buckets))]

    def prune(self) -> None:
        """Forget addresses whose bucket is full again (called now and then)."""
        now = self.clock()
        full = [a for a in self.buckets if self._tokens(a, now) >= self.burst]
        for a in full:
            del self.buckets[a]

    @property
    def active(self) -> bool:
        """True while some address has failures (only then is anything checked)."""
        return bool(self.buckets)

    def blocked_addresses(self) -> int:
        now = self.clock()
        return sum(1 for a in self.buckets if self._tokens(a, now) < 1.0)


def client_address(peer: str, forwarded_for: bytes | None,
                   trusted: tuple[IPNetwork, ...]) -> str:
    """The address the throttle keys a client by.

    ``peer`` is the socket's peer address; when it is a trusted proxy, the last address
    of ``X-Forwarded-For`` that is not a trusted proxy.  IPv6 addresses become their /64.

    >>> nets = (ipaddress.ip_network("10.0.0.0/8"),)
    >>> client_address("10.1.2.3", b"203.0.113.9, 10.0.0.7", nets)
    '203.0.113.9'
    >>> client_address("203.0.113.5", b"1.2.3.4", nets)   # not a proxy: its word is not taken
    '203.0.113.5'
    >>> client_address("2001:db8:1:2:3:4:5:6", None, ())
    '2001:db8:1:2::/64'
    """
    addr = peer
    if trusted and forwarded_for and _in(peer, trusted):
        for hop in reversed(forwarded_for.decode("latin-1").split(",")):
            hop = hop.strip()
            if not hop:
                continue
            addr = hop
            if not _in(hop, trusted):
                break
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return addr
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def _in(addr: str, nets: tuple[IPNetwork, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return False
    return any(ip in n for n in nets)
