"""``ldpstream serve``: the query API under uvicorn, configured from ``LDP_…`` variables."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

__all__ = ["main"]


def main() -> int:
    import uvicorn

    from .app import create_app
    from .config import ApiSettings

    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = ApiSettings.from_env()  # fails loudly, naming the bad variable
    app = create_app(settings)
    if not settings.metrics_port:
        uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning",
                    access_log=False, timeout_graceful_shutdown=3)
        return 0
    import asyncio

    from .app import create_metrics_app

    class SideServer(uvicorn.Server):
        """The /metrics port's server: the API's server owns the signals, this one
        stops when that one has."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    api = uvicorn.Server(uvicorn.Config(app, host=settings.host, port=settings.port,
                                        log_level="warning", access_log=False,
                                        timeout_graceful_shutdown=3))
    side = SideServer(uvicorn.Config(create_metrics_app(app), host=settings.metrics_host,
                                     port=settings.metrics_port, log_level="warning",
                                     access_log=False, lifespan="off"))

    async def both() -> None:
        task = asyncio.create_task(side.serve())
        try:
            await api.serve()
        finally:
            side.should_exit = True
            await task

    logging.getLogger("ldpstream.api").warning(
        "/metrics on http://%s:%d/metrics (not on the API's port)", settings.metrics_host,
        settings.metrics_port)
    asyncio.run(both())
    return 0
