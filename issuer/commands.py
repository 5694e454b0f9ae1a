"""The issuer's verb of the ``ldpstream`` command: ``issuer``.

The service registers its own verbs; :mod:`ldpctl.cli` collects every service's.
"""

from __future__ import annotations

import argparse

__all__ = ["add_commands"]


def _cmd_issuer(args: argparse.Namespace) -> int:
    import os

    from .app import main

    if args.port is not None:  # the flag wins over LDP_ISSUER_PORT
        os.environ["LDP_ISSUER_PORT"] = str(args.port)
    return main()


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    issuer_help = ("run the Privacy Pass token issuer: devices get blind-signed tokens (RFC "
                   "9578 type 2), at most a collection's quota per window (settings: "
                   "LDP_ISSUER_KEYS, LDP_ISSUER_OPEN, LDP_ISSUER_ATTESTER, LDP_ISSUER_HOST/PORT, "
                   "LDP_TOKEN_ISSUER_NAME, LDP_REDIS_URL…; docs/privacy-pass.md)")
    p = sub.add_parser("issuer", help=issuer_help, description=issuer_help)
    p.add_argument("--port", type=int, default=None,
                   help="listen on this port (default: LDP_ISSUER_PORT, else 8090; 0 = free)")
    p.set_defaults(func=_cmd_issuer)
