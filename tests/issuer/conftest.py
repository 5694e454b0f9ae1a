"""The issuer as a child process (``python -m issuer``) on the session's real Redis."""

from __future__ import annotations

import os
import time
from typing import Any

from ldpcore.collection import CollectionSpec
from ldpstream.storage import CollectionCatalog

from ..integration.helpers import ROOT, ServiceProcess

__all__ = ["IssuerProcess", "issuer_env", "register"]


def issuer_env(redis_server: Any, names: dict[str, str], **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    env.update({"LDP_REDIS_URL": redis_server.url, "LDP_REDIS_PREFIX": names["prefix"],
                "LDP_ISSUER_PORT": "0", "PYTHONPATH": str(ROOT)})
    env.update(extra)
    return env


def register(redis_client: Any, prefix: str, *specs: CollectionSpec) -> None:
    """Put ``specs`` in the Redis catalogue, as ``POST /v1/collections`` does."""
    CollectionCatalog(redis_client, prefix).register_all(specs)


class IssuerProcess(ServiceProcess):
    """``python -m issuer``; :attr:`port` once it listens."""

    module = "issuer"
    port = 0

    def start(self, timeout: float = 60.0) -> IssuerProcess:
        self.spawn()
        deadline = time.monotonic() + timeout
        mark = "ldpstream issuer: listening on http://"
        while time.monotonic() < deadline:
            for line in self.output().splitlines():
                if line.startswith(mark):
                    self.port = int(line[len(mark):].split()[0].rsplit(":", 1)[1])
                    return self
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"the issuer exited with {self.proc.returncode}:\n"
                                     f"{self.output()}")
            time.sleep(0.05)
        raise AssertionError(f"the issuer did not listen within {timeout} s:\n{self.output()}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"
