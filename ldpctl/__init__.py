"""The top floor: the ``ldpstream`` command and the tools that run the whole system.

Above the services, and the only package that may import them: the CLI
(:mod:`ldpctl.cli`: shared verbs here, each service's verbs registered by the service's
own ``commands`` module), the local stack (:mod:`ldpctl.stack`: ``ldpstream up``), the
replicated cluster on one machine and its failover client (:mod:`ldpctl.cluster`,
:mod:`ldpctl.failover`), and the benchmarks that span services (:mod:`ldpctl.soak`,
:mod:`ldpctl.clusterbench`).  Nothing below imports it (``tests/test_layering.py``).

Named for what it does, as ``kubectl`` or ``systemctl``: it controls the services and
holds nothing a service needs.  The servers it starts under them (brokers, Redis, the
containers backend of the tests) import no service and stay in :mod:`ldpstream.dev`.
"""

from __future__ import annotations

__all__: list[str] = []
