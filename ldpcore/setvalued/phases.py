r"""Set-valued collections and their multi-phase protocols: one collection per phase.

A *set-valued collection* is a collection whose mechanism is ``ps``, ``psi`` or
``setsize``: its domain (``categories``) names the items and a device holds a set
of them (:func:`index_sets` maps label sets to a :class:`SetBatch`).

A multi-phase protocol (LDPMiner, SVIM, SVSM: :mod:`ldpcore.setvalued.protocols`)
runs as a *group* of collections, one per phase, each declaring

.. code-block:: yaml

    protocol: {name: svim, group: apps, phase: candidates, k: 16, epsilon_total: 2.0}

* a phase's parameters (candidate items, candidate itemsets, padding length)
  come from the answer of the previous phase: :func:`next_phase` builds the next
  collection's declaration from this one's spec and state (the query API serves
  it at ``GET /v1/collections/{id}/next-phase``; an operator POSTs it);
* a device reports to each phase at most once (the usual cadence: one report per
  window, memoized);
* **ε per device** (``epsilon_total``, checked against the phase's ε):
  for ``svim`` and ``svsm`` every device takes part in *one* phase of the group,
  chosen by :func:`device_phase` from a device secret and the group name with
  the stated ``fractions``, so it spends that phase's ε = ``epsilon_total``;
  for ``ldpminer`` every device reports to both phases at ε/2 each, so
  ``epsilon_total`` = 2 × the phase's ε.

Phases, in order: ``svim``: candidates → sizes → frequencies; ``svsm``: the same,
then itemset-sizes → itemsets; ``ldpminer``: candidates → frequencies.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..errors import ParameterError
from .base import SetBatch, flatten_sets
from .protocols import itemset_candidates, top_candidates, truncation_correction

if TYPE_CHECKING:
    from ..base import Mechanism, State

__all__ = ["SET_VALUED_MECHANISMS", "PHASES", "DEFAULT_FRACTIONS", "Protocol", "is_set_valued",
           "index_sets", "device_phase", "next_phase", "top_items", "top_itemsets"]

SET_VALUED_MECHANISMS = ("ps", "psi", "setsize")
"""Mechanisms whose devices hold a set of items."""

PHASES: dict[str, tuple[str, ...]] = {
    "svim": ("candidates", "sizes", "frequencies"),
    "svsm": ("candidates", "sizes", "frequencies", "itemset-sizes", "itemsets"),
    "ldpminer": ("candidates", "frequencies"),
}
"""The phases of each protocol, in order."""

DEFAULT_FRACTIONS: dict[str, tuple[float, ...]] = {
    "svim": (0.5, 0.1, 0.4),
    "svsm": (0.25, 0.05, 0.2, 0.1, 0.4),
}
"""Shares of a group's devices per phase (partitioned protocols)."""

_MECH_OF_PHASE = {"candidates": "ps", "sizes": "setsize", "frequencies": "ps",
                  "itemset-sizes": "setsize", "itemsets": "psi"}


@dataclass(frozen=True)
class Protocol:
    """The ``protocol`` key of a phase collection (see the module docstring)."""

    name: str
    group: str
    phase: str
    k: int
    epsilon_total: float
    fractions: tuple[float, ...] | None = None

    @classmethod
    def from_dict(cls, raw: Any, oracle: Mechanism) -> Protocol:
        """Validate against the phase collection's oracle (raises :class:`ParameterError`)."""
        if not isinstance(raw, Mapping):
            raise ParameterError("protocol must be an object {name, group, phase, k, "
                                 "epsilon_total[, fractions]}")
        extra = sorted(set(raw) - {"name", "group", "phase", "k", "epsilon_total", "fractions"})
        if extra:
            raise ParameterError(f"unknown protocol key(s) {extra}")
        name = raw.get("name")
        if name not in PHASES:
            raise ParameterError(f"protocol.name must be one of {sorted(PHASES)}, got {name!r}")
        group = raw.get("group")
        if not isinstance(group, str) or not 1 <= len(group) <= 64:
            raise ParameterError("protocol.group must be a string of 1 to 64 characters")
        phase = raw.get("phase")
        if phase not in PHASES[name]:
            raise ParameterError(f"protocol.phase must be one of {list(PHASES[name])} for "
                                 f"{name!r}, got {phase!r}")
        k = raw.get("k")
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 2048:
            raise ParameterError(f"protocol.k must be an integer in [1, 2048], got {k!r}")
        if oracle.mechanism != _MECH_OF_PHASE[phase]:
            raise ParameterError(f"protocol phase {phase!r} needs mechanism "
                                 f"{_MECH_OF_PHASE[phase]!r}, got {oracle.mechanism!r}")
        eps = raw.get("epsilon_total")
        per_phase = 2 if name == "ldpminer" else 1
        if (isinstance(eps, bool) or not isinstance(eps, (int, float))
                or not math.isclose(float(eps), per_phase * oracle.epsilon, rel_tol=1e-12)):
            what = "2 × the phase's ε (every device reports to both phases)" if per_phase == 2 \
                else "the phase's ε (every device reports to one phase)"
            raise ParameterError(f"protocol.epsilon_total must be {what} = "
                                 f"{per_phase * oracle.epsilon!r}, got {eps!r}")
        fractions: tuple[float, ...] | None = None
        if name in DEFAULT_FRACTIONS:
            fr = raw.get("fractions", list(DEFAULT_FRACTIONS[name]))
            if (not isinstance(fr, list) or len(fr) != len(PHASES[name])
                    or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0
                               for x in fr) or not math.isclose(sum(fr), 1.0, abs_tol=1e-9)):
                raise ParameterError(f"protocol.fractions must be {len(PHASES[name])} positive "
                                     f"numbers summing to 1, one per phase {list(PHASES[name])}")
            fractions = tuple(float(x) for x in fr)
        elif "fractions" in raw:
            raise ParameterError("protocol.fractions is for partitioned protocols (svim, svsm); "
                                 "ldpminer devices report to every phase")
        return cls(name, group, phase, k, float(eps), fractions)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "group": self.group, "phase": self.phase,
                               "k": self.k, "epsilon_total": self.epsilon_total}
        if self.fractions is not None:
            out["fractions"] = list(self.fractions)
        return out

    @property
    def phase_index(self) -> int:
        return PHASES[self.name].index(self.phase)

    def next_phase_name(self) -> str | None:
        phases = PHASES[self.name]
        i = self.phase_index
        return phases[i + 1] if i + 1 < len(phases) else None


def is_set_valued(oracle_spec: Mapping[str, Any]) -> bool:
    """True for the oracle spec of a set-valued collection."""
    return oracle_spec.get("mechanism") in SET_VALUED_MECHANISMS


class ItemDomain(typing.Protocol):
    """What :func:`index_sets` reads of a domain (a :class:`ldpcore.collection.Domain`)."""

    @property
    def size(self) -> int: ...
    def index(self, values: Any) -> npt.NDArray[np.int64]: ...


def index_sets(domain: ItemDomain, sets: Iterable[Iterable[Any]]) -> SetBatch:
    """Map sets of labels (or values) of ``domain`` to a :class:`SetBatch` of indices."""
    owners, flat, n = flatten_sets(sets, what="a list of items")
    idx = domain.index(flat) if flat else np.zeros(0, np.int64)
    return SetBatch.from_pairs(owners, idx, n, domain.size)


def device_phase(secret: bytes, group: str, fractions: Sequence[float]) -> int:
    """The one phase (index) of ``group`` a device takes part in, from its secret.

    HMAC-SHA256(secret, group) read as a uniform number in [0, 1) against the
    cumulative ``fractions``: stable for a device, independent across groups.

    >>> device_phase(b"device-1", "apps", (0.5, 0.1, 0.4)) in (0, 1, 2)
    True
    """
    digest = hmac.new(secret, group.encode(), hashlib.sha256).digest()
    u = int.from_bytes(digest[:8], "big") / 2.0**64
    pos = int(np.searchsorted(np.cumsum(fractions), u, side="right"))
    return min(pos, len(fractions) - 1)


def _phase_dict(base: Mapping[str, Any], protocol: Protocol, phase: str,
                oracle: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in base.items() if k not in ("fingerprint", "oracle", "protocol", "id")}
    out["id"] = f"{protocol.group}.{phase}"
    out["oracle"] = oracle
    out["protocol"] = {**protocol.to_dict(), "phase": phase}
    out["description"] = f"{protocol.name} phase {phase!r} of group {protocol.group!r}"
    return out


def next_phase(spec_dict: Mapping[str, Any], protocol: Protocol, oracle: Mechanism,
               state: State) -> dict[str, Any]:
    """The declaration of the phase after this one, from this phase's spec and state.

    ``spec_dict`` is the phase collection's :meth:`CollectionSpec.to_dict`.  The new
    collection keeps the domain, window and retention; its id is
    ``"{group}.{phase}"``.  Raises :class:`ParameterError` after the last phase.
    """
    from .ps import PaddingSampling, PaddingSamplingItemsets, SetSize

    nxt = protocol.next_phase_name()
    if nxt is None:
        raise ParameterError(f"{protocol.phase!r} is the last phase of {protocol.name!r}")
    eps = oracle.epsilon
    two_k = min(2 * protocol.k, oracle.domain_size)
    if protocol.phase == "candidates":
        assert isinstance(oracle, PaddingSampling)
        cands = top_candidates(oracle.estimate(state), two_k)
        if nxt == "sizes":
            new = {"mechanism": "setsize", "epsilon": eps, "candidates": cands,
                   "max_size": len(cands)}
        else:  # ldpminer: the candidates padded to 2k, OLH, ε/2
            new = {"mechanism": "ps", "epsilon": eps, "length": len(cands), "inner": "olh",
                   "candidates": cands}
    elif protocol.phase in ("sizes", "itemset-sizes"):
        assert isinstance(oracle, SetSize)
        length = oracle.size_percentile(state, 0.9)
        if nxt == "frequencies":
            new = {"mechanism": "ps", "epsilon": eps, "length": length,
                   "candidates": list(oracle.candidates or [])}
        else:
            new = {"mechanism": "psi", "epsilon": eps, "length": length,
                   "itemsets": [list(x) for x in oracle.itemsets or []]}
    else:  # svsm: frequencies → itemset-sizes
        assert isinstance(oracle, PaddingSampling) and not isinstance(
            oracle, PaddingSamplingItemsets) and oracle.candidates is not None
        est = oracle.estimate(state)
        k_items = min(protocol.k, 12, len(oracle.candidates))
        items = top_candidates(est, k_items)
        its = itemset_candidates(items, [float(est[i]) for i in items], 2 * protocol.k)
        new = {"mechanism": "setsize", "epsilon": eps, "itemsets": its, "max_size": len(its)}
    return _phase_dict(spec_dict, protocol, nxt, new)


def _correction(sizes: tuple[Mechanism, State] | None, length: int) -> float:
    from .ps import SetSize

    if sizes is None:
        return 1.0
    oracle, state = sizes
    assert isinstance(oracle, SetSize)
    return truncation_correction(oracle.size_distribution(state), length)


def top_items(oracle: Mechanism, state: State, k: int,
              sizes: tuple[Mechanism, State] | None = None) -> dict[str, Any]:
    """The top ``k`` items of a ``ps`` state with standard errors; with the SVIM size
    phase's (oracle, state), the estimates and errors carry its truncation correction."""
    from .ps import PaddingSampling

    assert isinstance(oracle, PaddingSampling)
    u = _correction(sizes, oracle.length)
    raw = oracle.estimate(state)
    pool = oracle.candidates if oracle.candidates is not None else list(range(raw.size))
    order = top_candidates(raw[pool], min(k, len(pool)))
    items = [int(pool[i]) for i in order]
    est = raw[items] * u
    se = u * np.array([oracle.std_error(state.n, float(np.clip(f, 0, 1))) for f in raw[items]])
    return {"items": items, "frequencies": est, "std_errors": se, "correction": u}


def top_itemsets(oracle: Mechanism, state: State, k: int,
                 sizes: tuple[Mechanism, State] | None = None) -> dict[str, Any]:
    """The top ``k`` candidate itemsets of a ``psi`` state with standard errors (corrected
    like :func:`top_items`)."""
    from .ps import PaddingSamplingItemsets

    assert isinstance(oracle, PaddingSamplingItemsets)
    u = _correction(sizes, oracle.length)
    sup, se = oracle.itemset_support(state)
    order = top_candidates(sup, min(k, sup.size))
    return {"itemsets": [oracle.itemsets[i] for i in order], "supports": sup[order] * u,
            "std_errors": se[order] * u, "correction": u}
