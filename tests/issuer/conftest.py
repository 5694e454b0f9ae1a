"""The issuer as a child process (``python -m issuer``) on the session's real Redis."""

from __future__ import annotations

import os
from typing import Any

from ldpcore.collection import CollectionSpec
from ldpstream.storage import CollectionCatalogue

from ..integration.helpers import ROOT, ListeningProcess

__all__ = ["IssuerProcess", "issuer_env", "register"]


def issuer_env(redis_server: Any, names: dict[str, str], **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    env.update({"LDP_REDIS_URL": redis_server.url, "LDP_REDIS_PREFIX": names["prefix"],
                "LDP_ISSUER_PORT": "0", "PYTHONPATH": str(ROOT)})
    env.update(extra)
    return env


def register(redis_client: Any, prefix: str, *specs: CollectionSpec) -> None:
    """Put ``specs`` in the Redis catalogue, as ``POST /v1/collections`` does."""
    CollectionCatalogue(redis_client, prefix).register_all(specs)


class IssuerProcess(ListeningProcess):
    """``python -m issuer``; :attr:`port` once it listens."""

    module = "issuer"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"
