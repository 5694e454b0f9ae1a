"""Set-valued data: padding-and-sampling oracles and the LDPMiner / SVIM / SVSM protocols.

* :mod:`.base` — batches of item sets, padding and sampling, privacy amplification;
* :mod:`.ps` — the registered mechanisms ``ps`` (item frequencies), ``psi``
  (itemset supports) and ``setsize`` (set-size distribution);
* :mod:`.protocols` — LDPMiner (Qin et al., CCS 2016), SVIM and SVSM (Wang, Li &
  Jha, IEEE S&P 2018): their phases, how each phase's oracle is built from the
  previous phases' answers, and an in-process simulation of a whole run;
* :mod:`.synthetic` — the documented synthetic set-valued data model.
"""

from __future__ import annotations

from .base import SetBatch, SetValued, amplified_epsilon

__all__ = ["SetBatch", "SetValued", "amplified_epsilon"]
