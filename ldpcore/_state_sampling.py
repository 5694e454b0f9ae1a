r"""Exact state samplers: draw ``aggregate(perturb(values))`` without simulating reports.

For n values drawn i.i.d. from a distribution π, each report is i.i.d. from the
mechanism's *output* distribution :math:`P(y) = \sum_x \pi(x) M(y \mid x)`, and a
histogram-like state (one count per output cell) is then exactly
:math:`\mathrm{Multinomial}(n, P)`: one draw over the cells, in time O(cells),
whatever n.  The helpers below give P for the channels the range oracles use, and a
chunked fallback that really perturbs values (O(n)) for channels without one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._transforms import fwht, next_pow2
from .base import FloatArray, FrequencyOracle, IntArray
from .errors import ParameterError

__all__ = ["check_distribution", "multinomial_cells", "hrr_cell_probs",
           "local_hashing_cell_probs", "sample_counts", "perturb_counts"]

_CHUNK = 1 << 18


def check_distribution(distribution: Any, size: int, name: str = "distribution") -> FloatArray:
    """A probability vector of length ``size``: finite, >= 0, summing to 1 (±1e-9)."""
    p = np.asarray(distribution, dtype=np.float64)
    if p.shape != (size,):
        raise ParameterError(f"{name} must be a probability vector of length {size}, "
                             f"got shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0) or abs(float(p.sum()) - 1.0) > 1e-9:
        raise ParameterError(f"{name} must be finite, >= 0 and sum to 1 "
                             f"(got sum {float(np.nansum(p))!r})")
    out: FloatArray = p / p.sum()
    return out


def multinomial_cells(n: int, probs: FloatArray, rng: np.random.Generator) -> IntArray:
    """``Multinomial(n, probs)`` with probs clipped at 0 and renormalised (rounding)."""
    flat = np.clip(probs.reshape(-1), 0.0, None)
    out: IntArray = rng.multinomial(n, flat / flat.sum()).astype(np.int64).reshape(probs.shape)
    return out


def hrr_cell_probs(dist: FloatArray, p_keep: float) -> FloatArray:
    r"""Output distribution of HRR over cells (j, b), shape (D, 2), D = next power of two.

    :math:`j` is uniform; the true sign :math:`H[j, x]` is +1 with probability
    :math:`(1 + \theta_j)/2`, :math:`\theta = H\pi` (one fast Walsh–Hadamard transform),
    and is kept with probability p, so
    :math:`P(j, 0) = \frac1D\big(p\frac{1+\theta_j}2 + (1-p)\frac{1-\theta_j}2\big)`.
    ``dist`` may be a signed vector with :math:`|H\,\cdot| \le 1` (HaarHRR's details).
    """
    d = next_pow2(dist.size)
    pad = np.zeros(d)
    pad[:dist.size] = dist
    theta = np.clip(fwht(pad), -1.0, 1.0)
    plus = (1.0 + theta) / 2
    keep_plus = p_keep * plus + (1 - p_keep) * (1 - plus)
    out: FloatArray = np.stack([keep_plus, 1.0 - keep_plus], axis=1) / d
    return out


def local_hashing_cell_probs(dist: FloatArray, g: int, r: int, p_keep: float) -> FloatArray:
    r"""Output distribution of local hashing over cells (a, t), shape :math:`(g^r, g)`.

    a is uniform over :math:`g^r` linear hashes :math:`h_a(x) = \sum_j a_j x_j \bmod g`
    (base-g digits) and t keeps :math:`h_a(x)` with probability p, else is any other of
    the g values (each :math:`q = (1-p)/(g-1)`), so
    :math:`P(a, t) = g^{-r}\,(q + (p - q)\,P_\pi[h_a(X) = t])`.  With
    :math:`\phi(u) = E_\pi[\omega^{\langle u, X\rangle}]` (one r-dimensional DFT of π over
    :math:`\mathbb{Z}_g^r`), :math:`P_\pi[h_a(X) = t] = \frac1g \sum_k \omega^{-kt}
    \phi(k a)`: an inverse DFT over k per hash.  Cost :math:`O(g^{r+1} r)`.
    """
    n_hashes = g**r
    pad = np.zeros(n_hashes)
    pad[:dist.size] = dist
    # C-order axis i of the reshaped π is digit r-1-i, so a flat index of the spectrum
    # is sum_j u_j g^j in the same digit convention as values and hashes.
    spec = np.fft.fftn(pad.reshape((g,) * r)).reshape(-1) if r else pad.astype(complex)
    a = np.arange(n_hashes, dtype=np.int64)
    phi = np.empty((n_hashes, g), dtype=complex)
    for k in range(g):
        idx = np.zeros(n_hashes, dtype=np.int64)
        for j in range(r):
            idx += ((k * ((a // g**j) % g)) % g) * g**j
        phi[:, k] = spec[idx]
    hashed = np.clip(np.fft.ifft(phi, axis=1).real, 0.0, 1.0)  # P[h_a(X) = t]
    q = (1.0 - p_keep) / (g - 1)
    out: FloatArray = (q + (p_keep - q) * hashed) / n_hashes
    return out


def perturb_counts(oracle: FrequencyOracle, dist: FloatArray, n: int,
                   rng: np.random.Generator) -> IntArray:
    """Fallback (O(n)): draw the value counts, then perturb and aggregate in chunks."""
    counts = np.zeros(oracle.state_shape, dtype=np.int64)
    per_value = rng.multinomial(n, dist)
    values = np.repeat(np.arange(dist.size, dtype=np.int64), per_value)
    rng.shuffle(values)
    for start in range(0, values.size, _CHUNK):
        chunk = values[start:start + _CHUNK]
        counts += oracle._aggregate(oracle._perturb(chunk, rng))
    return counts


def sample_counts(oracle: FrequencyOracle, dist: FloatArray, n: int,
                  rng: np.random.Generator) -> IntArray:
    """Counts of ``oracle``'s state for n values i.i.d. from ``dist``: exact and O(state)
    for HRR, GRR, unary encodings and local hashing (and any oracle with its own ``sample_state``),
    else the O(n) fallback :func:`perturb_counts`."""
    if n == 0:
        return np.zeros(oracle.state_shape, dtype=np.int64)
    mech = oracle.mechanism
    if mech == "hrr":
        return multinomial_cells(n, hrr_cell_probs(dist, float(oracle.p)), rng)  # type: ignore
    if mech == "grr":
        p, q = float(oracle.p), float(oracle.q)  # type: ignore[attr-defined]
        return multinomial_cells(n, p * dist + q * (1.0 - dist), rng)
    if mech in ("oue", "sue"):
        # Given the value counts m_v, bit v is set in Bin(m_v, p) + Bin(n - m_v, q) reports,
        # independently over v.
        p, q = float(oracle.p), float(oracle.q)  # type: ignore[attr-defined]
        m = rng.multinomial(n, dist)
        return (rng.binomial(m, p) + rng.binomial(n - m, q)).astype(np.int64)
    if mech in ("olh", "blh"):
        g, r = int(oracle.g), int(oracle.r)  # type: ignore[attr-defined]
        p_keep = float(oracle.p)  # type: ignore[attr-defined]
        return multinomial_cells(n, local_hashing_cell_probs(dist, g, r, p_keep), rng)
    own = getattr(oracle, "sample_state", None)
    if own is not None:
        counts: IntArray = own(dist, n, rng).counts
        return counts
    return perturb_counts(oracle, dist, n, rng)
