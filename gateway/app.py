"""``ldpstream gateway``: start-up, the collection catalogue cache, shutdown.

Start-up fails loudly (exit code 2, the variable named) on a bad ``LDP_…`` setting,
and with a message when Kafka or Redis cannot be reached.  Then: the reports topic is
created if missing, the producer learns its partitions, the catalogue is read from
Redis, and the server listens (the line ``ldpstream gateway: listening on
http://HOST:PORT`` tells where, also when ``LDP_GATEWAY_PORT=0`` picked a free port).
SIGTERM/SIGINT stop accepting connections, answer what is queued, then exit 0.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
import time
from typing import Any

from ldpcore.collection import CollectionSpec
from ldpstream.storage import Keys

from .batcher import Batcher, KafkaSink
from .config import GatewaySettings
from .metrics import GatewayMetrics
from .parse import Catalogue
from .server import GatewayServer

__all__ = ["CatalogueCache", "ensure_topic", "main", "serve"]

log = logging.getLogger("ldpstream.gateway")

MISS_TTL = 1.0
"""Seconds an unknown collection id stays unknown before Redis is asked again."""


class CatalogueCache:
    """The Redis collection catalogue (``P collections``), re-read every ``refresh`` s.

    A message of an id missing here makes the gateway ask Redis for that one id (at
    most once per :data:`MISS_TTL` seconds per id), so a collection registered a moment
    ago is accepted at once and a flood of unknown ids costs Redis little.
    """

    def __init__(self, redis: Any, prefix: str, refresh: float) -> None:
        self.redis, self.key, self.refresh = redis, Keys(prefix).collections, refresh
        self.current = Catalogue()
        self._misses: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None

    def get(self) -> Catalogue:
        return self.current

    def _rebuild(self, raw: dict[Any, Any]) -> None:
        new = Catalogue()
        old = self.current.by_id
        for k, v in raw.items():
            try:
                spec = CollectionSpec.from_dict(json.loads(v))
            except Exception as exc:  # noqa: BLE001 - one bad entry must not stop the others
                log.warning("catalogue entry %r is unreadable: %r", k, exc)
                continue
            prev = old.get(spec.id)
            if prev is not None and prev.fingerprint == spec.fingerprint:
                new.by_id[spec.id] = prev
                new.by_bytes[spec.id.encode("ascii")] = prev
            else:
                new.add(spec)
        self.current = new

    async def load(self) -> None:
        self._rebuild(await self.redis.hgetall(self.key))

    async def lookup(self, cid: str) -> bool:
        """Re-read collection ``cid``; True if the catalogue has it now."""
        if cid in self.current:
            return True
        now = time.monotonic()
        if now - self._misses.get(cid, -MISS_TTL) < MISS_TTL:
            return False
        raw = await self.redis.hget(self.key, cid)
        if raw is None:
            if len(self._misses) > 10_000:
                self._misses.clear()
            self._misses[cid] = now
            return False
        cat = Catalogue()
        cat.by_id, cat.by_bytes = dict(self.current.by_id), dict(self.current.by_bytes)
        cat.add(CollectionSpec.from_dict(json.loads(raw)))
        self.current = cat
        return cid in cat

    def start(self) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(self.refresh)
                try:
                    await self.load()
                except Exception as exc:  # noqa: BLE001 - Redis away: keep the last catalogue
                    log.warning("re-reading the catalogue failed: %r", exc)
        self._task = asyncio.get_running_loop().create_task(loop())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()


async def reachable(bootstrap: str, timeout: float = 2.0) -> bool:
    """True if a TCP connection to one of the bootstrap brokers opens within ``timeout``."""
    for hp in bootstrap.split(","):
        host, _, port = hp.strip().rpartition(":")
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)),
                                               timeout)
        except (TimeoutError, OSError):
            continue
        writer.close()
        return True
    return False


def ensure_topic(settings: GatewaySettings, attempts: int = 60) -> None:
    """Create the reports topic if it is missing (the aggregator does the same)."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    last: Exception | None = None
    for _ in range(attempts):
        admin = None
        try:
            admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap,
                                     request_timeout_ms=5000,
                                     **settings.kafka_security.kafka_python())
            if settings.reports_topic in set(admin.list_topics()):
                return
            try:
                admin.create_topics([NewTopic(
                    settings.reports_topic, settings.topic_partitions,
                    settings.topic_replication,
                    topic_configs={"max.message.bytes": str(17 << 20),
                                   **({"min.insync.replicas": str(settings.topic_min_isr)}
                                      if settings.topic_min_isr else {})})])
            except TopicAlreadyExistsError:
                pass
            return
        except Exception as exc:  # noqa: BLE001 - the broker may still be starting
            last = exc
            time.sleep(0.5)
        finally:
            if admin is not None:
                admin.close()
    raise RuntimeError(f"could not reach Kafka at {settings.kafka_bootstrap} to create topic "
                       f"{settings.reports_topic!r}: {last!r}")


async def serve(settings: GatewaySettings, sink: KafkaSink,
                started: asyncio.Future[int] | None = None) -> None:
    """Run the gateway until SIGTERM/SIGINT (or ``stop`` set on the returned server)."""
    loop = asyncio.get_running_loop()
    rds = settings.redis_options.connect_async(settings.redis_url, socket_timeout=5)
    cache = CatalogueCache(rds, settings.redis_prefix, settings.catalog_refresh)
    for attempt in range(60):
        try:
            await cache.load()
            break
        except Exception as exc:  # noqa: BLE001
            if attempt == 59:
                raise RuntimeError(f"cannot read the catalogue from Redis at "
                                   f"{settings.redis_url}: {exc!r}") from None
            await asyncio.sleep(0.5)
    metrics = GatewayMetrics(__import__("prometheus_client").CollectorRegistry())
    gate = None
    if settings.tokens != "off":
        from .tokens import TokenGate

        def window_seconds(cid: str) -> int | None:
            entry = cache.get().by_id.get(cid)
            return None if entry is None else entry.spec.window_seconds

        gate = TokenGate(rds, settings.redis_prefix, mode=settings.tokens,
                         issuer_name=settings.token_issuer_name, skew=settings.token_skew,
                         window_seconds=window_seconds,
                         collection_ids=lambda: list(cache.get().by_id))
    batcher = Batcher(sink.send_all, linger=settings.linger_ms / 1000.0,
                      batch_bytes=settings.batch_bytes, queue_bytes=settings.queue_bytes,
                      ack_timeout=settings.ack_timeout_ms / 1000.0,
                      retry_after=settings.retry_after, on_flush=metrics.on_flush,
                      on_failure=sink.reset, tokens=gate)

    async def ready() -> tuple[bool, dict[str, Any]]:
        try:
            redis_ok = bool(await asyncio.wait_for(rds.ping(), 2.0))
        except Exception:  # noqa: BLE001 - a probe
            redis_ok = False
        kafka_ok = batcher.broker_up and await reachable(settings.kafka_bootstrap)
        return redis_ok and kafka_ok, {"kafka": kafka_ok, "redis": redis_ok,
                                       "collections": len(cache.get()),
                                       "access": settings.access,
                                       "access_note": settings.access_note()}

    server = GatewayServer(catalogue=cache.get, lookup=cache.lookup, batcher=batcher,
                           keys=settings.keys, cors_origins=settings.cors_origins,
                           max_body=settings.max_body, retry_after=settings.retry_after,
                           ready=ready, metrics=metrics.page,
                           max_connections=settings.max_connections)
    metrics.stats, metrics.batcher = server.stats, batcher
    metrics.connections = lambda: len(server.connections)
    listener = await loop.create_server(server.protocol, settings.host, settings.port,
                                        backlog=4096, reuse_address=True)
    port = int(listener.sockets[0].getsockname()[1])
    cache.start()
    server.start_sweeper()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    fleets = len(set(settings.keys.values()))
    print(f"ldpstream gateway: listening on http://{settings.host}:{port} "
          f"(topic {settings.reports_topic}, {len(cache.get())} collections, "
          f"{f'device keys of {fleets} fleets' if fleets else 'no device keys'}, "
          f"Privacy Pass tokens {settings.tokens})", flush=True)
    print(f"ldpstream gateway: access {settings.access}: {settings.access_note()}", flush=True)
    if settings.access == "open":
        log.warning("the gateway is open: %s", settings.access_note())
    if started is not None:
        started.set_result(port)
    try:
        await stop.wait()
    finally:
        listener.close()
        server.stopping = True
        await batcher.drain()
        server.write_pending()  # the last answers leave before their connections close
        for conn in list(server.connections):
            conn.close()
        server.stop_sweeper()
        cache.stop()
        await rds.aclose()


def main() -> int:
    """Entry point of ``ldpstream gateway`` and ``python -m gateway``."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: "
                                                   "%(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)
    settings = GatewaySettings.from_env()
    try:
        import uvloop
        run: Any = uvloop.run
    except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard]
        run = asyncio.run
    try:
        ensure_topic(settings)
        sink = KafkaSink(settings.kafka_bootstrap, settings.reports_topic,
                         batch_bytes=settings.batch_bytes,
                         ack_timeout_ms=settings.ack_timeout_ms,
                         **settings.kafka_security.kafka_python())
        sink.warm_up()
    except Exception as exc:  # noqa: BLE001 - say what failed, no traceback
        print(f"ldpstream gateway: {exc}", file=sys.stderr)
        return 1
    try:
        run(serve(settings, sink))
    except RuntimeError as exc:
        print(f"ldpstream gateway: {exc}", file=sys.stderr)
        return 1
    finally:
        sink.close()
    return 0
