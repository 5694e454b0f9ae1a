"""The shared layer of the ldpstream services.

What the producer, the aggregator and the query API have in common, and nothing
else: the settings layer (``LDP_…`` variables, :mod:`ldpstream.settings`,
:mod:`ldpstream.connections`), the Redis storage contract (keys, Lua scripts, the
collection catalogue: :mod:`ldpstream.storage`), the one parser of collections files
(:mod:`ldpstream.collections_file`), and the servers of local runs and tests
(:mod:`ldpstream.dev`).

Imports go one way: :mod:`ldpcore` ← ``ldpstream`` ← ``producer`` / ``aggregator`` /
``query_api`` / ``gateway`` / ``issuer`` ← :mod:`ldpctl` (the CLI and the local stack).
The services never import each other, and ``ldpstream`` imports none of them.
"""

from __future__ import annotations

import os as _os

# One BLAS thread per Python thread, unless set otherwise: the services' concurrency is
# their own (estimation pools per answer kind, workers); OpenBLAS's own threads per call
# spin against them on a shared machine (a Square Wave EMS reconstruction at 1,024 bins:
# 0.4-0.7 s of CPU with them, 0.08-0.12 s without).  Read when numpy is first imported,
# which the CLI does after this.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    _os.environ.setdefault(_var, "1")

__all__: list[str] = []
