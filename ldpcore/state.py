"""Additive sufficient statistics: the :class:`State` every mechanism aggregates into.

It sits below :mod:`ldpcore.base` and :mod:`ldpcore.capabilities` (both speak of
states), so neither has to import the other for it.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import numpy.typing as npt

from .errors import StateError

__all__ = ["State", "IntArray", "FloatArray"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

_STATE_MAGIC = b"LDPS"
_STATE_VERSION = 1
_STATE_HEADER = struct.Struct("<4sB16sQB")  # magic, version, fingerprint, n, ndim


class State:
    """Additive sufficient statistics of a batch of reports.

    ``counts`` is an ``int64`` array whose shape depends only on the oracle's
    parameters; ``n`` is the number of reports.  States of the same oracle add
    exactly: ``aggregate(a ∪ b) == aggregate(a) + aggregate(b)``.

    >>> import ldpcore
    >>> o = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=4)
    >>> s = o.aggregate(o.perturb([0, 1, 2], rng=1)) + o.aggregate(o.perturb([3], rng=2))
    >>> s.n
    4
    >>> ldpcore.State.from_bytes(s.to_bytes()) == s
    True
    """

    __slots__ = ("fingerprint", "n", "counts")

    def __init__(self, fingerprint: str, n: int, counts: IntArray) -> None:
        self.fingerprint = fingerprint
        self.n = int(n)
        self.counts = counts

    def _check_compatible(self, other: State) -> None:
        if self.fingerprint != other.fingerprint or self.counts.shape != other.counts.shape:
            raise StateError(
                f"cannot add states of different oracles ({self.fingerprint} {self.counts.shape} "
                f"and {other.fingerprint} {other.counts.shape})"
            )

    def __add__(self, other: State) -> State:
        if not isinstance(other, State):
            return NotImplemented
        self._check_compatible(other)
        return State(self.fingerprint, self.n + other.n, self.counts + other.counts)

    def __iadd__(self, other: State) -> State:
        if not isinstance(other, State):
            return NotImplemented
        self._check_compatible(other)
        self.counts += other.counts
        self.n += other.n
        return self

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, State):
            return NotImplemented
        return (self.fingerprint == other.fingerprint and self.n == other.n
                and self.counts.shape == other.counts.shape
                and bool(np.array_equal(self.counts, other.counts)))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"State(fingerprint={self.fingerprint!r}, n={self.n}, shape={self.counts.shape})"

    def copy(self) -> State:
        """A deep copy."""
        return State(self.fingerprint, self.n, self.counts.copy())

    def to_bytes(self) -> bytes:
        """Serialise: header (magic, version, fingerprint, n, shape) + little-endian int64."""
        shape = self.counts.shape
        head = _STATE_HEADER.pack(_STATE_MAGIC, _STATE_VERSION, self.fingerprint.encode("ascii"),
                                  self.n, len(shape))
        dims = struct.pack(f"<{len(shape)}Q", *shape)
        return head + dims + self.counts.astype("<i8", copy=False).tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> State:
        """Inverse of :meth:`to_bytes`; raises :class:`StateError` on malformed input."""
        hs = _STATE_HEADER.size
        if len(data) < hs:
            raise StateError(f"state bytes too short ({len(data)} < {hs})")
        magic, version, fp, n, ndim = _STATE_HEADER.unpack_from(data)
        if magic != _STATE_MAGIC:
            raise StateError("not a ldpcore state (bad magic)")
        if version != _STATE_VERSION:
            raise StateError(f"unsupported state version {version} (supported: {_STATE_VERSION})")
        if len(data) < hs + 8 * ndim:
            raise StateError("state bytes truncated in shape")
        shape = struct.unpack_from(f"<{ndim}Q", data, hs)
        body = data[hs + 8 * ndim:]
        size = math.prod(shape)
        if len(body) != 8 * size:
            raise StateError(f"state body has {len(body)} bytes, expected {8 * size}")
        counts = np.frombuffer(body, dtype="<i8").astype(np.int64).reshape(shape)
        return cls(fp.decode("ascii"), n, counts)
