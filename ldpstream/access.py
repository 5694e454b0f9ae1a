"""Who may read: hashed read tokens (``LDP_READ_TOKENS``) and private collections.

The query API's read routes require a bearer token when ``LDP_READ_TOKENS`` names a
*token file*.  The file holds SHA-256 hashes, never tokens, one per line, each with
the private collections it may read::

    # sha256 of the token                                            scope
    9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08               # public only
    sha256:60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752 sales,hr
    2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae  *             # everything

* no scope: every public collection;
* ``a,b``: every public collection and the private collections ``a`` and ``b``;
* ``*``: every collection, and ``/metrics`` on the API's port.

The file is re-read when it changes (its size, modification time or inode; checked at
most once a second), so tokens are added, rotated and revoked without a restart: add
the new token's line, hand the token out, remove the old line.  A file that becomes
unreadable or malformed keeps the last good set (and the API logs why).  ``ldpstream
read-token`` mints a token and prints its line.

A collection is *private* when its declaration says ``private: true`` (collections
file, or the body of ``POST /v1/collections``).  The mark is not part of the spec (the
fingerprint devices carry does not change): it is kept in the Redis set ``P private``
(:attr:`ldpstream.storage.Keys.private`).  A private collection is readable only with
a token naming it (or ``*``); to anyone else it answers exactly as an unknown id.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .settings import ConfigError

__all__ = ["TokenScope", "TokenFile", "token_hash", "parse_token_file", "new_token",
           "split_private", "add_read_token_parser"]

log = logging.getLogger("ldpstream.access")

_HEX = re.compile(r"^(?:sha256:)?([0-9a-fA-F]{64})$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class TokenScope:
    """What one read token may read besides the public collections."""

    collections: frozenset[str] = frozenset()
    everything: bool = False

    def may_read(self, cid: str, private: bool) -> bool:
        """True if this token may read collection ``cid`` (``private``: it is marked so).

        >>> TokenScope(frozenset({"a"})).may_read("a", True), TokenScope().may_read("a", True)
        (True, False)
        """
        return not private or self.everything or cid in self.collections

    def describe(self) -> str:
        return "*" if self.everything else ",".join(sorted(self.collections))


def token_hash(token: str) -> str:
    """The hex SHA-256 of a token: what a token file stores.

    >>> token_hash("test")[:16]
    '9f86d081884c7d65'
    """
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh read token: 32 random bytes (OS CSPRNG), URL-safe base64."""
    return secrets.token_urlsafe(32)


def parse_token_file(text: str, source: str) -> dict[str, TokenScope]:
    """Lines ``HASH [SCOPE]`` (``#`` comments) → hex hash → scope.

    >>> t = parse_token_file("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    ...                      " a,b  # two private ones", "f")
    >>> sorted(next(iter(t.values())).collections)
    ['a', 'b']
    >>> parse_token_file("hunter2", "LDP_READ_TOKENS")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ldpstream.settings.ConfigError: LDP_READ_TOKENS line 1: 'hunter2' is not a SHA-256 hash ...
    """
    out: dict[str, TokenScope] = {}
    for no, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        m = _HEX.match(fields[0])
        if m is None:
            raise ConfigError(f"{source} line {no}: {fields[0][:12]!r} is not a SHA-256 hash "
                              "(64 hex digits): the file stores hashes, never tokens "
                              "(ldpstream read-token prints the line of a token)")
        if len(fields) > 2:
            raise ConfigError(f"{source} line {no}: expected 'HASH [SCOPE]', got "
                              f"{len(fields)} fields (SCOPE is '*' or ids separated by "
                              "commas, no spaces)")
        scope = TokenScope()
        if len(fields) == 2:
            if fields[1] == "*":
                scope = TokenScope(everything=True)
            else:
                ids = [c for c in fields[1].split(",") if c]
                bad = [c for c in ids if not _ID.match(c)]
                if bad or not ids:
                    raise ConfigError(f"{source} line {no}: scope {fields[1]!r} must be '*' "
                                      "or collection ids separated by commas")
                scope = TokenScope(frozenset(ids))
        digest = m.group(1).lower()
        if digest in out:
            raise ConfigError(f"{source} line {no}: this hash is listed twice")
        out[digest] = scope
    return out


class TokenFile:
    """The read tokens of a file, re-read when the file changes.

    ``lookup`` stats the file at most every ``recheck`` seconds; when its inode, size
    or modification time changed it is parsed again.  A file that fails to parse (or
    disappears) keeps the previous tokens, so a bad edit cannot open the API or lock
    every reader out; it is logged.  The first read must succeed (:class:`ConfigError`
    naming ``source``).
    """

    def __init__(self, path: str, *, source: str = "LDP_READ_TOKENS", recheck: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path, self.source, self.recheck, self.clock = path, source, recheck, clock
        try:
            stat = os.stat(path)
            with open(path) as fh:
                text = fh.read()
        except OSError as exc:
            raise ConfigError(f"{source}: cannot read the token file {path!r}: {exc}") from None
        self.tokens = parse_token_file(text, f"{source} ({path})")
        self._signature = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        self._checked = clock()

    def _refresh(self) -> None:
        now = self.clock()
        if now - self._checked < self.recheck:
            return
        self._checked = now
        try:
            stat = os.stat(self.path)
            signature = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
            if signature == self._signature:
                return
            with open(self.path) as fh:
                tokens = parse_token_file(fh.read(), f"{self.source} ({self.path})")
        except (OSError, ConfigError) as exc:
            log.error("keeping the previous read tokens: %s", exc)
            return
        self.tokens, self._signature = tokens, signature
        log.info("read tokens reloaded from %s: %d tokens", self.path, len(tokens))

    def lookup(self, token: str) -> TokenScope | None:
        """The scope of ``token``, or None if the file does not list its hash."""
        self._refresh()
        return self.tokens.get(token_hash(token))


def split_private(raw: Any) -> tuple[Any, bool | None]:
    """A collection declaration without its ``private`` key, and that key's value.

    ``private`` is an access mark, not part of the spec (see the module docstring);
    None when the declaration does not say.

    >>> split_private({"id": "a", "private": True})
    ({'id': 'a'}, True)
    >>> split_private({"id": "a"})
    ({'id': 'a'}, None)
    """
    if not isinstance(raw, Mapping) or "private" not in raw:
        return raw, None
    flag = raw["private"]
    if not isinstance(flag, bool):
        from ldpcore import ParameterError

        raise ParameterError(f"private must be true or false, got {flag!r}")
    return {k: v for k, v in raw.items() if k != "private"}, flag


def _cmd_read_token(args: argparse.Namespace) -> int:
    scope = (args.collections or "").strip()
    line_scope = f" {scope}" if scope else ""
    if scope:  # validate as the API will
        parse_token_file(f"{'0' * 64}{line_scope}", "--collections")
    token = args.hash if args.hash is not None else new_token()
    if args.hash is None:
        print(f"token: {token}")
        print("  (give it to the reader; it is shown once and stored nowhere)")
    print(f"line:  {token_hash(token)}{line_scope}")
    print("  (append it to the file LDP_READ_TOKENS names; the API re-reads it within "
          "a second)")
    return 0


def add_read_token_parser(sub: Any) -> None:
    """``ldpstream read-token``: mint a read token and print the line of its hash."""
    p = sub.add_parser("read-token", help="mint a read token of the query API and print "
                                          "the line of its hash for the LDP_READ_TOKENS file")
    p.add_argument("--collections", default=None,
                   help="private collections it may read: ids separated by commas, or '*' "
                        "for every collection and /metrics (default: public ones only)")
    p.add_argument("--hash", metavar="TOKEN", default=None,
                   help="print the line of this existing token instead of minting one")
    p.set_defaults(func=_cmd_read_token)
