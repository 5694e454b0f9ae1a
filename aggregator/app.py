"""Lifespan of ``ldpstream aggregate``: settings → clients → collections → worker → clean stop.

The engine (``LDP_ENGINE`` / ``ldpstream aggregate --engine``) picks the driver:
Faust serves ``/metrics`` and ``/healthz`` from its own web server; the direct
aiokafka driver from :class:`aggregator.health.HealthServer`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import threading
from collections.abc import AsyncIterator

from ldpcore import ParameterError
from ldpstream.collections_file import register_catalogue_file
from ldpstream.retention import Janitor, JanitorMetrics
from ldpstream.storage import CollectionConflict

from .config import WorkerSettings
from .metrics import AggregatorMetrics
from .worker import Driver, make_driver, run_worker

__all__ = ["lifespan", "serve", "main"]

log = logging.getLogger("ldpstream.aggregator")


@contextlib.asynccontextmanager
async def lifespan(settings: WorkerSettings) -> AsyncIterator[Driver]:
    """Own the Redis client, the Prometheus registry and (optionally) the metrics server;
    yield the worker (the engine's driver and its accumulator, ``.acc``)."""
    from prometheus_client import CollectorRegistry

    from .health import HealthServer

    client = settings.redis_options.connect(settings.redis_url, socket_timeout=10,
                                            socket_connect_timeout=5, health_check_interval=10)
    registry = CollectorRegistry()
    server = None
    janitor_stop = threading.Event()
    janitor: threading.Thread | None = None
    try:
        if settings.collections_file:
            specs = register_catalogue_file(client, settings.redis_prefix,
                                            settings.collections_file).specs
            log.info("registered %d collection(s) from %s", len(specs),
                     settings.collections_file)
        worker = make_driver(settings, client, AggregatorMetrics(registry),
                             stall_after=stall_after(settings))
        stats = worker.acc.stats
        if settings.metrics_port and settings.engine == "aiokafka":
            # (the Faust engine serves these pages from Faust's web server)
            server = HealthServer(registry, lambda: stats.last_tick,
                                  host=settings.metrics_host, port=settings.metrics_port,
                                  stall_after=stall_after(settings)).start()
        if settings.release_interval_ms > 0:
            janitor = Janitor(bootstrap=settings.kafka_bootstrap, redis=client,
                              topic=settings.reports_topic, prefix=settings.redis_prefix,
                              interval=settings.release_interval_ms / 1000,
                              admin_config=settings.kafka_security.kafka_python(),
                              replicas=settings.release_replicas,
                              metrics=JanitorMetrics(registry)).start(janitor_stop)
            log.info("janitor: releasing counted records of %s every %.1f s",
                     settings.reports_topic, settings.release_interval_ms / 1000)
        yield worker
    finally:
        janitor_stop.set()
        if janitor is not None:
            janitor.join(20)
        if server is not None:
            server.shutdown()
        client.close()


def stall_after(settings: WorkerSettings) -> float:
    """Seconds without a loop turn before ``/healthz`` says 503.

    A loop stuck for several session timeouts has lost its partitions anyway.
    """
    return max(30.0, 3 * settings.session_timeout_ms / 1000)


async def serve(settings: WorkerSettings) -> None:
    """Run one worker until SIGTERM/SIGINT, then flush and stop cleanly."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with lifespan(settings) as worker:
        await run_worker(worker, stop)


def main() -> int:
    """Entry point of ``ldpstream aggregate`` / ``python -m aggregator``."""
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = WorkerSettings.from_env()  # fails loudly, naming the bad variable
    try:
        asyncio.run(serve(settings))
    except (ParameterError, CollectionConflict) as exc:  # the collections file: say why
        print(f"ldpstream aggregate: LDP_COLLECTIONS_FILE {settings.collections_file}: {exc}",
              file=sys.stderr)
        return 2
    return 0
