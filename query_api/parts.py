"""The parts an answer computes before its level is known, shared by the answers of one
state (a module of its own: the estimation layers of every collection kind share through
it, and import nothing of each other for it; see :mod:`query_api.estimates`)."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from contextvars import ContextVar
from typing import Any, TypeVar

import numpy as np

import ldpcore

from .cache import ByteLRU

__all__ = ["SHARED", "STATE_KEY", "state_digest", "shared", "peek", "ByIdentity", "fingerprint"]

T = TypeVar("T")


SHARED: ContextVar[ByteLRU | None] = ContextVar("ldp_shared_parts", default=None)
"""The cache the answer computed on this thread shares its level-free parts in (the
service sets it to its state cache, bounded by ``LDP_STATE_CACHE_MB``); None: not shared."""


STATE_KEY: ContextVar[tuple[ldpcore.State, Hashable] | None] = ContextVar(
    "ldp_state_key", default=None)
"""(the state the answer on this thread is computed on, a key naming it): the service sets
it to that state's version (equal versions, equal states: :mod:`query_api.store`), so the
parts of that state are found without hashing its counts on every lookup."""


def state_digest(state: ldpcore.State) -> Hashable:
    """What names a state's content: the key :data:`STATE_KEY` gives it, else the SHA-256 of
    its fingerprint, n, shape and counts (equal digests, equal states)."""
    held = STATE_KEY.get()
    if held is not None and held[0] is state:
        return held[1]
    h = hashlib.sha256()
    counts = np.ascontiguousarray(state.counts, dtype="<i8")
    h.update(f"{state.fingerprint}|{int(state.n)}|{counts.shape}".encode())
    h.update(counts.tobytes())
    return h.digest()


def shared(part: str, oracle: Any, state: ldpcore.State, params: tuple[Any, ...],
           make: Callable[[], Any]) -> Any:
    """``make()``, kept in :data:`SHARED` (when set) under (part, the oracle's fingerprint,
    the state's digest, params): what the answers of one state share."""
    memo = SHARED.get()
    if memo is None:
        return make()
    return memo.get_or_make(_part_key(part, oracle, state, params), make)


def peek(part: str, oracle: Any, state: ldpcore.State, params: tuple[Any, ...]) -> Any:
    """The part :func:`shared` keeps under these arguments, or None (nothing is made)."""
    memo = SHARED.get()
    if memo is None:
        return None
    return memo.get(_part_key(part, oracle, state, params))


def _part_key(part: str, oracle: Any, state: ldpcore.State, params: tuple[Any, ...]
              ) -> tuple[Any, ...]:
    return ("part", part, fingerprint(oracle), state_digest(state), params)


class ByIdentity:
    """Values made from objects, kept while those very objects are: an LRU of ``size``
    entries under the objects' ids and an ``extra`` key.  The objects are held with the
    value, so an id is not reused while kept, and a hit is checked by identity (for what
    is built once per object and never changed: an oracle, a spec, a prepared answer)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._held: OrderedDict[tuple[Hashable, ...], tuple[tuple[Any, ...], Any]] = \
            OrderedDict()
        self._lock = threading.Lock()

    def get_or_make(self, objects: tuple[Any, ...], extra: Hashable,
                    make: Callable[[], T]) -> T:
        key = (*map(id, objects), extra)
        with self._lock:
            hit = self._held.get(key)
            if hit is not None and all(a is b for a, b in zip(hit[0], objects, strict=True)):
                self._held.move_to_end(key)
                out: T = hit[1]
                return out
        value = make()
        with self._lock:
            self._held[key] = (objects, value)
            while len(self._held) > self.size:
                self._held.popitem(last=False)
        return value


_FINGERPRINTS = ByIdentity(256)


def fingerprint(oracle: Any) -> str:
    """``oracle.fingerprint`` (a SHA-256 of its canonical spec, ~30 µs), kept per oracle
    object (the service builds one oracle per collection spec and never changes it), for
    the 256 latest."""
    out: str = _FINGERPRINTS.get_or_make((oracle,), None, lambda: oracle.fingerprint)
    return out
