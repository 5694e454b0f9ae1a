"""``ldpstream serve``: the query API under uvicorn, configured from ``LDP_…`` variables."""

from __future__ import annotations

import logging

__all__ = ["main"]


def main() -> int:
    import uvicorn

    from .app import create_app
    from .config import ApiSettings

    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = ApiSettings.from_env()  # fails loudly, naming the bad variable
    app = create_app(settings)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning",
                access_log=False, timeout_graceful_shutdown=3)
    return 0
