"""The shared layer of the ldpstream services.

What the producer, the aggregator and the query API have in common, and nothing
else: the settings layer (``LDP_…`` variables, :mod:`ldpstream.settings`,
:mod:`ldpstream.connections`), the Redis storage contract (keys, Lua scripts, the
collection catalog: :mod:`ldpstream.storage`), the one parser of collections files
(:mod:`ldpstream.collections_file`), the CLI and the embedded dev stack.

Imports go one way: :mod:`ldpcore` ← ``ldpstream`` ← ``producer`` / ``aggregator`` /
``query_api``.  The services never import each other; ``ldpstream`` imports them only
in its CLI entry point, lazily, to run the verb asked for.
"""

from __future__ import annotations

__all__: list[str] = []
