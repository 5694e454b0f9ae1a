"""The shared layer of the ldpstream services.

What the producer, the aggregator and the query API have in common, and nothing
else: the settings layer (``LDP_…`` variables, :mod:`ldpstream.settings`,
:mod:`ldpstream.connections`), the Redis storage contract (keys, Lua scripts, the
collection catalog: :mod:`ldpstream.storage`), the one parser of collections files
(:mod:`ldpstream.collections_file`), and the servers of local runs and tests
(:mod:`ldpstream.dev`).

Imports go one way: :mod:`ldpcore` ← ``ldpstream`` ← ``producer`` / ``aggregator`` /
``query_api`` / ``gateway`` / ``issuer`` ← :mod:`ldpctl` (the CLI and the local stack).
The services never import each other, and ``ldpstream`` imports none of them.
"""

from __future__ import annotations

__all__: list[str] = []
