r"""Reference perturbation: every mechanism driven by a stream of uniform 32-bit words.

numpy's :meth:`~ldpcore.base.Mechanism.perturb` draws its randomness in vectorised
blocks, an order no other language can replay.  This module defines, report by report,
the exact order in which each mechanism consumes random draws (``docs/wire-format.md``,
"Reference perturbation"), so that the device SDKs (``sdks/js``, ``sdks/java``) and
ldpcore produce byte-identical reports from the same word stream (the shared test
vectors in ``sdks/vectors``).  It is distributed exactly as ``perturb`` (checked by
``tests/ldpcore/test_reference.py``: two-sample chi-square and the ε audit).

Primitives, over a stream of u32 words ``w0, w1, ...``:

* ``uniform()``: two words a, b; :math:`((a \gg 5)\cdot 2^{26} + (b \gg 6)) / 2^{53}`,
  a float64 uniform on the grid :math:`k 2^{-53}` of [0, 1);
* ``below(n)`` for :math:`1 \le n \le 2^{32}`: words w until
  :math:`w < \lfloor 2^{32}/n \rfloor n` (rejection), then :math:`w \bmod n`;
* ``bernoulli(p)``: ``uniform() < p``.

Set-valued mechanisms (``ps``, ``psi``, ``setsize``) take sets of item indices: padding
and sampling (:func:`padded_entry`), then the inner oracle's draws; ``multi`` takes one
index per attribute and ``vector`` d numbers: question sampling (:func:`sample_questions`,
a partial Fisher–Yates shuffle), then each sampled question's oracle at ε/k in ascending
order.

Pure Python (slow: for vectors, SDK checks and tests, not for simulations).

>>> import ldpcore
>>> o = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=4)
>>> src = WordStream([0, 0, 7, 0])          # uniform() = 0.0 < p: the true value is kept
>>> perturb_reference(o, [2], src).columns["y"].tolist(), src.used
([2], 2)
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from ._field import _primitive_poly
from .base import Mechanism, Reports
from .errors import ParameterError, StateError

__all__ = ["DrawSource", "WordStream", "OsWords", "NumpyWords", "PermanentWords",
           "PRR_LABEL", "uniform", "below",
           "bernoulli", "perturb_reference", "rerandomize_reference", "pcg64_words",
           "pem_hash_pool", "projective_point", "gf_mul", "padded_entry",
           "sample_questions"]

_TWO53 = 9007199254740992.0
_U32 = 1 << 32


class DrawSource(Protocol):
    """A source of uniform 32-bit words."""

    def next_u32(self) -> int:
        """The next word, an integer in [0, 2^32)."""
        ...


class WordStream:
    """A fixed list of words (test vectors); raises :class:`StateError` when exhausted."""

    def __init__(self, words: Iterable[int]) -> None:
        self.words = [int(w) for w in words]
        if any(not 0 <= w < _U32 for w in self.words):
            raise ParameterError("words must be integers in [0, 2^32)")
        self.used = 0

    def next_u32(self) -> int:
        if self.used >= len(self.words):
            raise StateError(f"word stream exhausted after {self.used} words")
        w = self.words[self.used]
        self.used += 1
        return w


class OsWords:
    """Words from the OS CSPRNG (:func:`os.urandom`), fetched 4 KiB at a time."""

    def __init__(self) -> None:
        self._buf = b""
        self._at = 0

    def next_u32(self) -> int:
        if self._at >= len(self._buf):
            self._buf, self._at = os.urandom(4096), 0
        w = int.from_bytes(self._buf[self._at:self._at + 4], "little")
        self._at += 4
        return w


class NumpyWords:
    """Words from a seeded numpy generator (reproducible tests and simulations)."""

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)
        self._buf: list[int] = []
        self._at = 0

    def next_u32(self) -> int:
        if self._at >= len(self._buf):
            self._buf = self._rng.integers(0, _U32, size=4096, dtype=np.uint64).tolist()
            self._at = 0
        w = self._buf[self._at]
        self._at += 1
        return int(w)


PRR_LABEL = b"ldpstream/prr/v1"
"""Domain-separation label of the permanent-answer derivation (:class:`PermanentWords`)."""


class PermanentWords:
    r"""The word stream of a permanent answer, derived from a device secret (RAPPOR's PRR).

    RAPPOR (Erlingsson et al., CCS 2014, §3) draws a client's permanent randomized
    response from HMAC-SHA256 keyed by a per-client secret over the value, so the same
    value always gets the same answer without the answer (or the value) being stored.
    Here, for any mechanism, the permanent answer is the reference perturbation of the
    value drawing its words from

    .. math::

        s = \mathrm{HMAC}(\mathit{secret},\ \texttt{"ldpstream/prr/v1"} \,\|\, 0
            \,\|\, \mathit{fingerprint} \,\|\, 0 \,\|\, \mathit{key}),\qquad
        B_i = \mathrm{HMAC}(s,\ \mathrm{u32be}(i)),\ i = 0, 1, \ldots

    read as little-endian u32 words, 8 per block (HMAC in counter mode: a PRF stream).
    ``fingerprint`` is the collection's 16 hex digits; ``key`` the value's memo key in
    ASCII decimal (the domain index; for a set −1 − Σ 2^item; for an attribute tuple its
    mixed-radix index).  See docs/wire-format.md, "Permanent answers".

    >>> w = PermanentWords(bytes(32), "0123456789abcdef", 3)
    >>> w.next_u32() == PermanentWords(bytes(32), "0123456789abcdef", 3).next_u32()
    True
    """

    def __init__(self, secret: bytes, fingerprint: str, key: int | str) -> None:
        if not isinstance(secret, bytes | bytearray) or not 16 <= len(secret) <= 64:
            raise ParameterError("secret must be 16 to 64 bytes")
        msg = b"".join((PRR_LABEL, b"\x00", fingerprint.encode("ascii"), b"\x00",
                        str(int(key)).encode("ascii")))
        self._seed = hmac.new(bytes(secret), msg, hashlib.sha256).digest()
        self._block = 0
        self._buf = b""
        self._at = 0
        self.used = 0

    def next_u32(self) -> int:
        if self._at >= len(self._buf):
            self._buf = hmac.new(self._seed, self._block.to_bytes(4, "big"),
                                 hashlib.sha256).digest()
            self._block += 1
            self._at = 0
        w = int.from_bytes(self._buf[self._at:self._at + 4], "little")
        self._at += 4
        self.used += 1
        return w


def uniform(src: DrawSource) -> float:
    """A float64 uniform on [0, 1) from two words (53 random bits)."""
    a = src.next_u32() >> 5
    b = src.next_u32() >> 6
    return (a * 67108864 + b) / _TWO53


def below(src: DrawSource, n: int) -> int:
    """A uniform integer in [0, n), 1 <= n <= 2^32, by rejection (one word or more)."""
    if not 1 <= n <= _U32:
        raise ParameterError(f"n must be an integer in [1, 2^32], got {n}")
    limit = (_U32 // n) * n
    while True:
        w = src.next_u32()
        if w < limit:
            return w % n


def bernoulli(src: DrawSource, p: float) -> bool:
    """True with probability p: ``uniform() < p``."""
    return uniform(src) < p


# ---- hashing helpers (the SDKs implement the same) -------------------------------------

def _parity(x: int) -> int:
    return bin(x).count("1") & 1


def lh_hash(g: int, r: int, a: int, x: int) -> int:
    """Local hashing: :math:`\\sum_j a_j x_j \\bmod g` over r base-g digits."""
    acc = 0
    for _ in range(r):
        acc += (a % g) * (x % g)
        a //= g
        x //= g
    return acc % g


def gf_mul(m: int, poly: int, a: int, b: int) -> int:
    """Product in GF(m): modular for m prime, carry-less modulo ``poly`` for m = 2^b > 2."""
    if poly == 0:
        return a * b % m
    out = 0
    while b:
        if b & 1:
            out ^= a
        b >>= 1
        a <<= 1
        if a & m:
            a ^= poly
    return out


def projective_point(m: int, r: int, j: int) -> list[int]:
    """Row j's point of PG(r−1, m) in :func:`ldpcore._field.projective_points` order."""
    for lead in range(r):
        tail = r - lead - 1
        size = m**tail
        if j < size:
            pt = [0] * r
            pt[lead] = 1
            for t in range(tail):
                pt[lead + 1 + t] = (j // m ** (tail - 1 - t)) % m
            return pt
        j -= size
    raise ParameterError("row index beyond the projective space")


def sketch_hash(m: int, r: int, poly: int, row: int, x: int) -> int:
    """CMS/HCMS row hash :math:`h_j(x) = \\langle a_j, x \\rangle` over GF(m)."""
    pt = projective_point(m, r, row)
    acc = 0
    for i in range(r):
        d = (x // m**i) % m
        p = gf_mul(m, poly, pt[i], d)
        acc = acc ^ p if poly else (acc + p) % m
    return acc


_M64 = (1 << 64) - 1
_M128 = (1 << 128) - 1
_PCG_MULT = 0x2360ED051FC65DA44385DF649FCCF645


def _seed_sequence_state(seed: int, n_words32: int) -> list[int]:
    """numpy's ``SeedSequence(seed).generate_state(n_words32, uint32)`` (seed >= 0)."""
    mask = 0xFFFFFFFF
    entropy = []
    s = seed
    while True:
        entropy.append(s & mask)
        s >>= 32
        if not s:
            break
    hash_const = [0x43B0D7E5]

    def hashmix(value: int) -> int:
        value = (value ^ hash_const[0]) & mask
        hash_const[0] = (hash_const[0] * 0x931E8875) & mask
        value = (value * hash_const[0]) & mask
        return value ^ (value >> 16)

    def mix(x: int, y: int) -> int:
        res = (0xCA01F9DD * x - 0x4973F715 * y) & mask
        return res ^ (res >> 16)

    pool = [hashmix(entropy[i] if i < len(entropy) else 0) for i in range(4)]
    for i_src in range(4):
        for i_dst in range(4):
            if i_src != i_dst:
                pool[i_dst] = mix(pool[i_dst], hashmix(pool[i_src]))
    for i_src in range(4, len(entropy)):
        for i_dst in range(4):
            pool[i_dst] = mix(pool[i_dst], hashmix(entropy[i_src]))
    hc = 0x8B51F9DD
    out = []
    for i in range(n_words32):
        v = (pool[i % 4] ^ hc) & mask
        hc = (hc * 0x58F38DED) & mask
        v = (v * hc) & mask
        out.append(v ^ (v >> 16))
    return out


def pcg64_words(seed: int, count: int) -> list[int]:
    """The first ``count`` 64-bit outputs of ``numpy.random.default_rng(seed)`` (PCG64)."""
    w = _seed_sequence_state(seed, 8)
    v64 = [w[2 * i] | (w[2 * i + 1] << 32) for i in range(4)]
    init_state, init_seq = (v64[0] << 64) | v64[1], (v64[2] << 64) | v64[3]
    inc = ((init_seq << 1) | 1) & _M128
    state = (0 * _PCG_MULT + inc) & _M128
    state = (state + init_state) & _M128
    state = (state * _PCG_MULT + inc) & _M128
    out = []
    for _ in range(count):
        state = (state * _PCG_MULT + inc) & _M128
        hi, lo = state >> 64, state & _M64
        x, rot = hi ^ lo, hi >> 58
        out.append(((x >> rot) | (x << ((64 - rot) & 63))) & _M64)
    return out


def pem_hash_pool(hash_seed: int, groups: int, pool: int) -> tuple[list[int], list[int]]:
    """PEM's public multipliers and offsets, row-major (group, seed): a = w | 1, b = w >> 1.

    numpy's ``integers(0, 2**63, dtype=uint64)`` on PCG64 is Lemire's method with range
    2^63, i.e. the top 63 bits of one output word (no rejection is possible).
    """
    words = pcg64_words(hash_seed, 2 * groups * pool)
    n = groups * pool
    return [(w >> 1) * 2 + 1 for w in words[:n]], [w >> 1 for w in words[n:]]


# ---- per-mechanism reference kernels ---------------------------------------------------

def _grr_like(src: DrawSource, v: int, k: int, p: float) -> int:
    if bernoulli(src, p):
        return v
    return (v + 1 + below(src, k - 1)) % k


def _report(o: Any, v: int, src: DrawSource, caches: dict[int, Any]) -> dict[str, Any]:
    mech = o.mechanism
    cache: dict[str, Any] = caches.setdefault(id(o), {})
    if mech == "grr":
        return {"y": _grr_like(src, v, o.domain_size, o.p)}
    if mech in ("sue", "oue"):
        return {"bits": [i for i in range(o.domain_size)
                         if bernoulli(src, o.p if i == v else o.q)]}
    if mech in ("blh", "olh"):
        a = below(src, o.n_hashes)
        return {"a": a, "t": _grr_like(src, lh_hash(o.g, o.r, a, v), o.g, o.p)}
    if mech == "hr":
        row = v + 1
        z = below(src, o.K)
        want = bernoulli(src, o.p)
        inside = _parity(row & z) == 0
        return {"y": z if inside == want else z ^ (row & -row)}
    if mech == "hrr":
        j = below(src, o.D)
        flip = not bernoulli(src, o.p)
        return {"j": j, "b": _parity(j & v) ^ int(flip)}
    if mech == "ss":
        chosen = [v] if bernoulli(src, o.p) else []
        while len(chosen) < o.k:
            u = below(src, o.domain_size - 1)
            u += u >= v
            if u not in chosen:
                chosen.append(u)
        return {"bits": sorted(chosen)}
    if mech in ("cms", "hcms"):
        poly = cache.setdefault("poly", _primitive_poly(o.m.bit_length() - 1)
                                if o.m > 2 and o.m & (o.m - 1) == 0 else 0)
        j = below(src, o.k)
        hot = sketch_hash(o.m, o.r, poly, j, v)
        if mech == "cms":
            bits = []
            for idx in range(o.m):
                w = uniform(src)
                if (w >= o.flip) if idx == hot else (w < o.flip):
                    bits.append(idx)
            return {"j": j, "bits": bits}
        lcol = below(src, o.m)
        flip = not bernoulli(src, o.keep)
        return {"j": j, "l": lcol, "b": _parity(lcol & hot) ^ int(flip)}
    if mech == "hh":
        level = 1 + below(src, o.height)
        sub = o.levels[level - 1]
        return {"level": level, **_report(sub, v // o.fanout ** (o.height - level), src, caches)}
    if mech == "haar":
        level = 1 + below(src, o.height)
        j = below(src, o.padded >> level)
        node, right = v >> level, (v >> (level - 1)) & 1
        negative = _parity(j & node) ^ right
        return {"level": level, "j": j, "b": negative ^ int(not bernoulli(src, o.p))}
    if mech == "sw":
        u = (v + uniform(src)) / o.domain_size
        b = o.b
        near = bernoulli(src, 2 * b * o.p)
        t = uniform(src)
        y = u - b + 2 * b * t if near else (-b + t if t < u else b + t)
        idx = int(np.floor((y + b) / (1 + 2 * b) * o.out_bins))
        return {"y": min(max(idx, 0), o.out_bins - 1)}
    if mech == "pm":
        return _pm_t(o, 2 * ((v + uniform(src)) / o.domain_size) - 1, src)
    if mech == "duchi":
        return _duchi_t(o, 2 * ((v + uniform(src)) / o.domain_size) - 1, src, cache)
    if mech == "pem":
        groups = len(o.lengths)
        if "pool" not in cache:
            cache["pool"] = pem_hash_pool(o.hash_seed, groups, o.pool)
        mult, off = cache["pool"]
        group = below(src, groups)
        seed = below(src, o.pool)
        prefix = v >> (o.bits - o.lengths[group])
        x = (mult[group * o.pool + seed] * prefix + off[group * o.pool + seed]) & _M64
        h = ((x >> 32) * o.g) >> 32
        return {"group": group, "seed": seed, "y": _grr_like(src, h, o.g, o.p)}
    raise ParameterError(f"no reference perturbation for mechanism {mech!r}")


def _pm_t(o: Any, t: float, src: DrawSource) -> dict[str, Any]:
    """PM on t in [-1, 1] (after the binned value's t, or a vector's coordinate)."""
    c = o.C
    left = (c + 1) / 2 * t - (c - 1) / 2
    right = left + c - 1
    band = bernoulli(src, o.p_band)
    s = uniform(src)
    if band:
        y = left + s * (c - 1)
    else:
        rest = s * (c + 1)
        y = -c + rest if rest < left + c else right + (rest - (left + c))
    z = (y + c) / (2 * c) * 65536
    zi = float(np.floor(z + uniform(src)))
    return {"y": int(min(max(zi, 0.0), 65536.0))}


def _duchi_t(o: Any, t: float, src: DrawSource, cache: dict[str, Any]) -> dict[str, Any]:
    e = cache.setdefault("e", float(np.exp(o.epsilon)))
    return {"y": int(bernoulli(src, ((e - 1) * t + e + 1) / (2 * (e + 1))))}


def _columns(oracle: Mechanism, rows: Sequence[dict[str, Any]]) -> Reports:
    n = len(rows)
    cols: dict[str, np.ndarray] = {}
    for c in oracle.report_columns:
        if c.bits:
            arr = np.zeros((n, c.width * 8), dtype=np.uint8)
            for i, row in enumerate(rows):
                arr[i, row[c.name]] = 1
            cols[c.name] = np.packbits(arr, axis=1, bitorder="little").reshape(n, c.width)
        else:
            cols[c.name] = np.asarray([row[c.name] for row in rows], dtype=c.dtype)
    return Reports(oracle.mechanism, oracle.fingerprint, cols)


# ---- set-valued (ldpcore.setvalued) and multi-attribute (ldpcore.multi) kernels -------

def _set_entries(o: Any, items: list[int]) -> list[int]:
    """The entries a set contributes, ascending: the positions of the candidate itemsets it
    contains (``psi``, ``setsize`` with itemsets), of its candidate items (with
    ``candidates``), else its items."""
    itemsets = getattr(o, "itemsets", None)
    if itemsets is not None:
        have = set(items)
        return [j for j, its in enumerate(itemsets) if all(x in have for x in its)]
    if o.candidates is not None:
        pos = {c: i for i, c in enumerate(o.candidates)}
        return sorted(pos[x] for x in items if x in pos)
    return items


def padded_entry(src: DrawSource, entries: Sequence[int], m: int, length: int) -> int:
    """Padding and sampling of s = len(entries) entries to ``length`` l:
    ``t = below(max(s, l))``; the entry t if t < s, else the dummy ``m + below(l)``."""
    s = len(entries)
    t = below(src, max(s, length))
    return int(entries[t]) if t < s else m + below(src, length)


def _set_report(o: Any, items: list[int], src: DrawSource,
                caches: dict[int, Any]) -> dict[str, Any]:
    entries = _set_entries(o, items)
    if o.mechanism == "setsize":
        return _report(o.inner, min(len(entries), o.max_size), src, caches)
    return _report(o.inner, padded_entry(src, entries, o.entries, o.length), src, caches)


def sample_questions(src: DrawSource, q: int, k: int) -> list[int]:
    """k of the q questions without replacement, ascending: a partial Fisher–Yates shuffle
    of 0..q−1, ``j = i + below(q − i)`` and swap, for i = 0..k−1."""
    idx = list(range(q))
    for i in range(k):
        j = i + below(src, q - i)
        idx[i], idx[j] = idx[j], idx[i]
    return sorted(idx[:k])


def _multi_report(o: Any, row: Sequence[Any], src: DrawSource, caches: dict[int, Any],
                  continuous: bool) -> dict[str, Any]:
    names, subs = o.attribute_names, o._subs
    chosen = sample_questions(src, len(names), o.sample)
    vals = list(row) + [row[a] * o._radix[b] + row[b] for a, b in o._pairs]
    out: dict[str, Any] = {"attrs": chosen}
    for j, (name, sub) in enumerate(zip(names, subs, strict=True)):
        if j not in chosen:
            rep: dict[str, Any] = {c.name: [] if c.bits else 0 for c in sub.report_columns}
        elif continuous:
            t = min(max(float(vals[j]), -1.0), 1.0)
            rep = (_pm_t(sub, t, src) if sub.mechanism == "pm"
                   else _duchi_t(sub, t, src, caches.setdefault(id(sub), {})))
        else:
            rep = _report(sub, int(vals[j]), src, caches)
        for c in sub.report_columns:
            out[f"{name}.{c.name}"] = rep[c.name]
    return out


_SET_VALUED = ("ps", "psi", "setsize")


def _as_sets(oracle: Any, values: Any) -> list[list[int]]:
    d = oracle.domain_size
    out = []
    for v in values:
        items = [v] if isinstance(v, (int, np.integer)) else list(v)
        if any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not 0 <= x < d
               for x in items):
            raise ParameterError(f"set {v!r}: items must be integers in [0, {d})")
        out.append(sorted({int(x) for x in items}))
    return out


def _as_rows(oracle: Any, values: Any) -> list[list[Any]]:
    m = len(oracle.input_names)
    out: list[list[Any]] = []
    for v in values:
        if isinstance(v, (int, np.integer)) and oracle.mechanism == "multi":
            out.append([int(x) for x in oracle.split([int(v)])[0]])
            continue
        row = list(v)
        if len(row) != m:
            raise ParameterError(f"value {v!r} must hold {m} values, one per attribute "
                                 f"{list(oracle.input_names)}")
        if oracle.mechanism == "vector":
            if not all(isinstance(x, (int, float, np.number)) and np.isfinite(x) for x in row):
                raise ParameterError(f"value {v!r} must hold finite numbers")
            out.append([float(x) for x in row])
        else:
            oracle._check_matrix([row])
            out.append([int(x) for x in row])
    return out


def perturb_reference(oracle: Mechanism, values: Any, src: DrawSource) -> Reports:
    """Perturb ``values`` report by report, consuming ``src`` in the documented order.

    Values are domain indices (for ``pem`` integers in [0, 2^bits)); for ``ps``, ``psi``
    and ``setsize`` sets of item indices (an integer is a singleton); for ``multi`` rows
    of per-attribute indices (or mixed-radix indices); for ``vector`` rows of d numbers
    in [-1, 1] (clipped, not binned, as :meth:`NumericVector.perturb_vectors`).
    Distributed exactly as ``perturb`` (``perturb_sets``, ``perturb_attributes``,
    ``perturb_vectors``).
    """
    caches: dict[int, Any] = {}
    mech = oracle.mechanism
    if mech in _SET_VALUED:
        sets = _as_sets(oracle, values)
        return _columns(oracle, [_set_report(oracle, s, src, caches) for s in sets])
    if mech in ("multi", "vector"):
        rows = _as_rows(oracle, values)
        return _columns(oracle, [_multi_report(oracle, r, src, caches, mech == "vector")
                                 for r in rows])
    vals = [int(v) for v in np.atleast_1d(np.asarray(values)).tolist()]
    size = oracle.domain_size
    if any(not 0 <= v < size for v in vals):
        raise ParameterError(f"values must be integers in [0, {size})")
    return _columns(oracle, [_report(oracle, v, src, caches) for v in vals])


def rerandomize_reference(two_level: Any, permanent: Reports, src: DrawSource) -> Reports:
    """The two-level instantaneous channel (:meth:`TwoLevel.rerandomize`) per report:

    grr / olh / blh: ``bernoulli(p1)`` keeps y (t), else y + 1 + below(k − 1) mod k;
    sue / oue: one ``uniform()`` per bit i in order, 1 iff u < p1 (bit set) or u < q1;
    hrr: the bit is flipped iff ``uniform() >= p1``.
    """
    o = two_level.oracle
    z = o.validate(permanent)
    mech = o.mechanism
    cols = {k: np.array(v, copy=True) for k, v in z.columns.items()}
    n = len(z)
    if mech in ("grr", "olh", "blh"):
        name, k = ("y", o.domain_size) if mech == "grr" else ("t", o.g)
        for i in range(n):
            cols[name][i] = _grr_like(src, int(cols[name][i]), k, two_level.p1)
    elif mech in ("sue", "oue"):
        d = o.domain_size
        bits = np.unpackbits(cols["bits"], axis=1, count=d, bitorder="little")
        for i in range(n):
            for b in range(d):
                u = uniform(src)
                bits[i, b] = u < (two_level.p1 if bits[i, b] else two_level.q1)
        cols["bits"] = np.packbits(bits, axis=1, bitorder="little")
    else:
        for i in range(n):
            cols["b"][i] ^= int(uniform(src) >= two_level.p1)
    return Reports(z.mechanism, z.fingerprint, cols)
