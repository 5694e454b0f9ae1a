"""Caches of the query service bounded in bytes, not in entries.

An answer of a 2^20-value CDF is megabytes, a ``/mean`` a few hundred bytes; a summed
state of an OLH collection is tens of kilobytes, one of a PEM collection can be
megabytes.  A count bound either wastes memory or lets a few large entries take
gigabytes, so :class:`ByteLRU` keeps the least recently used entries whose sizes
(``getsizeof(value)``, as cachetools' ``Cache(maxsize, getsizeof)``) sum to at most
``max_bytes``.  An entry larger than the whole budget is not kept.

>>> c = ByteLRU(10, getsizeof=len)
>>> c.put("a", b"12345"); c.put("b", b"1234"); c.put("c", b"123")
>>> c.get("a") is None, c.currsize, len(c)
(True, 7, 2)
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

__all__ = ["ByteLRU", "size_of_answer", "size_of_state", "ENTRY_OVERHEAD"]

ENTRY_OVERHEAD = 200
"""Bytes charged per entry on top of its value: the key, the dict slot, the tuple."""


def size_of_answer(value: Any) -> int:
    """An encoded answer (bytes), or a (time, bytes, tag) triple of the newest answer."""
    if isinstance(value, tuple):
        return ENTRY_OVERHEAD + sum(len(x) for x in value if isinstance(x, (bytes, str)))
    return ENTRY_OVERHEAD + len(value)


def size_of_state(value: Any) -> int:
    """A summed state: its counts array (and a small object around it); a part of an
    answer derived from one (an array, or an object stating its ``nbytes``)."""
    counts = getattr(value, "counts", None)
    if isinstance(counts, np.ndarray):
        return ENTRY_OVERHEAD + int(counts.nbytes)
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return ENTRY_OVERHEAD + nbytes
    return ENTRY_OVERHEAD + sys.getsizeof(value)


class ByteLRU:
    """Least-recently-used mapping whose values' sizes sum to at most ``max_bytes``.

    ``on_change(entries, bytes, evicted)`` is called after every insertion (the service
    points it at its Prometheus metrics); ``evictions`` counts what was dropped for
    room.  Thread-safe (the estimation threads fill it).
    """

    def __init__(self, max_bytes: int, *, getsizeof: Callable[[Any], int],
                 on_change: Callable[[int, int, int], None] | None = None) -> None:
        self.max_bytes = int(max_bytes)
        self.getsizeof = getsizeof
        self.on_change = on_change
        self.currsize = 0
        self.evictions = 0
        self._data: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._making: dict[Hashable, threading.Lock] = {}

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: Hashable) -> Any:
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return None
            self._data.move_to_end(key)
            return hit[0]

    def put(self, key: Hashable, value: Any) -> None:
        size = int(self.getsizeof(value))
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.currsize -= old[1]
            if size <= self.max_bytes:
                self._data[key] = (value, size)
                self.currsize += size
            evicted = 0
            while self.currsize > self.max_bytes and self._data:
                _, (_, dropped) = self._data.popitem(last=False)
                self.currsize -= dropped
                evicted += 1
            self.evictions += evicted
            entries, used = len(self._data), self.currsize
        if self.on_change is not None:
            self.on_change(entries, used, evicted)

    def get_or_make(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The value of ``key``, made by ``make()`` and kept if absent: one thread makes
        it while the others asking for the same key wait for it (no duplicate work)."""
        hit = self.get(key)
        if hit is not None:
            return hit
        with self._lock:
            making = self._making.setdefault(key, threading.Lock())
        try:
            with making:
                hit = self.get(key)
                if hit is None:
                    hit = make()
                    self.put(key, hit)
                return hit
        finally:
            with self._lock:
                if self._making.get(key) is making:
                    del self._making[key]

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.currsize = 0
        if self.on_change is not None:
            self.on_change(0, 0, 0)
