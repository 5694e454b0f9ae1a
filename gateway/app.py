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
import ipaddress
import logging
import signal
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ldpcore.collection import CollectionSpec
from ldpstream.catalogue import Catalogue as CatalogueClient

from .auth import DeviceKeys, FailureThrottle
from .batcher import Batcher, KafkaSink
from .config import GatewaySettings
from .idempotency import IdempotencyStore, IdempotentPosts
from .metrics import GatewayMetrics
from .parse import Catalogue
from .server import GatewayServer

if TYPE_CHECKING:
    from .tokens import TokenGate

__all__ = ["GatewayCatalogue", "ensure_topic", "main", "serve"]

log = logging.getLogger("ldpstream.gateway")


class GatewayCatalogue:
    """The shared catalogue client (:class:`ldpstream.catalogue.Catalogue`: a version
    key checked every second, misses merged and negatively cached) and, built from it on
    every change, the gateway's :class:`~gateway.parse.Catalogue` of decoders (entries of
    unchanged collections are kept)."""

    def __init__(self, redis: Any, prefix: str, reread: float) -> None:
        self.current = Catalogue()
        self.client = CatalogueClient(redis, prefix, reread=reread, on_change=self._rebuild)
        self._task: asyncio.Task[None] | None = None

    def get(self) -> Catalogue:
        return self.current

    def _rebuild(self, specs: Mapping[str, CollectionSpec]) -> None:
        new = Catalogue()
        old = self.current.by_id
        for cid, spec in specs.items():
            prev = old.get(cid)
            if prev is not None and prev.fingerprint == spec.fingerprint:
                new.by_id[cid] = prev
                new.by_bytes[cid.encode("ascii")] = prev
            else:
                try:
                    new.add(spec)
                except Exception as exc:  # noqa: BLE001 - one bad entry must not stop the rest
                    log.warning("collection %r cannot be served: %r", cid, exc)
        self.current = new

    async def load(self) -> None:
        await self.client.load()

    def known_absent(self, cid: str) -> bool:
        return self.client.known_absent(cid)

    async def lookup(self, cid: str) -> bool:
        """True if ``cid`` is in the catalogue (after a merged check on a miss);
        :class:`~ldpstream.catalogue.CatalogueUnavailable` if Redis cannot tell."""
        await self.client.find(cid)
        return cid in self.current

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.client.run())

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
    cache = await _load_catalogue(settings, rds)
    metrics = GatewayMetrics(__import__("prometheus_client").CollectorRegistry())
    gate = _token_gate(settings, rds, cache)
    batcher = Batcher(sink.send_all, linger=settings.linger_ms / 1000.0,
                      batch_bytes=settings.batch_bytes, queue_bytes=settings.queue_bytes,
                      ack_timeout=settings.ack_timeout_ms / 1000.0,
                      retry_after=settings.retry_after, on_flush=metrics.on_flush,
                      on_failure=sink.reset, tokens=gate)
    server = _build_server(settings, rds, cache, batcher, metrics)
    listener = await loop.create_server(server.protocol, settings.host, settings.port,
                                        backlog=4096, reuse_address=True)
    port = int(listener.sockets[0].getsockname()[1])
    cache.start()
    server.start_sweeper()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    _announce(settings, port, len(cache.get()), gate)
    if started is not None:
        started.set_result(port)
    try:
        await stop.wait()
    finally:
        await _shut_down(listener, server, batcher, cache, rds)


async def _load_catalogue(settings: GatewaySettings, rds: Any) -> GatewayCatalogue:
    """The catalogue cache, read once from Redis (retried for 30 s while Redis starts)."""
    cache = GatewayCatalogue(rds, settings.redis_prefix, settings.catalog_refresh)
    for attempt in range(60):
        try:
            await cache.load()
            break
        except Exception as exc:  # noqa: BLE001
            if attempt == 59:
                raise RuntimeError(f"cannot read the catalogue from Redis at "
                                   f"{settings.redis_url}: {exc!r}") from None
            await asyncio.sleep(0.5)
    return cache


def _token_gate(settings: GatewaySettings, rds: Any, cache: GatewayCatalogue) -> TokenGate | None:
    """The Privacy Pass gate of the batcher, or None with ``LDP_GATEWAY_TOKENS=off``."""
    if settings.tokens == "off":
        return None
    from .tokens import TokenGate

    def window_seconds(cid: str) -> int | None:
        entry = cache.get().by_id.get(cid)
        return None if entry is None else entry.spec.window_seconds

    return TokenGate(rds, settings.redis_prefix, mode=settings.tokens,
                     issuer_name=settings.token_issuer_name, skew=settings.token_skew,
                     window_seconds=window_seconds,
                     collection_ids=lambda: list(cache.get().by_id),
                     verifier=settings.token_verifier)


def _build_server(settings: GatewaySettings, rds: Any, cache: GatewayCatalogue,
                  batcher: Batcher, metrics: GatewayMetrics) -> GatewayServer:
    """The HTTP server over the batcher, its readiness probe, and the metrics wired to it."""
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

    s = settings
    server = GatewayServer(
        catalogue=cache.get, lookup=cache.lookup, known_absent=cache.known_absent,
        batcher=batcher, cors_origins=s.cors_origins, retry_after=s.retry_after, ready=ready,
        metrics=metrics.page, authenticator=DeviceKeys(s.keys) if s.keys else None,
        throttle=FailureThrottle(burst=s.auth_fail_burst, rate=s.auth_fail_rate),
        trusted_proxies=tuple(ipaddress.ip_network(p, strict=False)
                              for p in s.trusted_proxies),
        limits=s.limits(),
        idempotency=IdempotentPosts(IdempotencyStore(
            rds, s.redis_prefix, ttl_s=s.idempotency_ttl_s,
            # the longest a request stays unanswered
            inflight_s=(s.linger_ms + s.ack_timeout_ms) / 1000 + 5)))
    metrics.stats, metrics.batcher, metrics.server = server.stats, batcher, server
    metrics.catalogue = cache.client
    metrics.connections = lambda: len(server.connections)
    return server


def _announce(settings: GatewaySettings, port: int, collections: int,
              gate: TokenGate | None) -> None:
    """The start-up lines (the first tells scripts and tests where the gateway listens)."""
    fleets = len(set(settings.keys.values()))
    print(f"ldpstream gateway: listening on http://{settings.host}:{port} "
          f"(topic {settings.reports_topic}, {collections} collections, "
          f"{f'device keys of {fleets} fleets' if fleets else 'no device keys'}, "
          f"Privacy Pass tokens {settings.tokens}"
          f"{'' if gate is None else ', RSA verification by ' + gate.verifier})", flush=True)
    print(f"ldpstream gateway: access {settings.access}: {settings.access_note()}", flush=True)
    if settings.access == "open":
        log.warning("the gateway is open: %s", settings.access_note())


async def _shut_down(listener: asyncio.Server, server: GatewayServer, batcher: Batcher,
                     cache: GatewayCatalogue, rds: Any) -> None:
    """Stop accepting, answer what is queued, then close connections, tasks and Redis."""
    listener.close()
    server.stopping = True
    await batcher.drain()
    server.write_pending()  # the last answers leave before their connections close
    for conn in list(server.connections):
        conn.close()
    server.stop_sweeper()
    cache.stop()
    await rds.aclose()


def raise_open_files_limit(want: int) -> int:
    """Lift the soft limit of open files towards ``want`` (within the hard limit); the
    limit now.  Every client connection is a file."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= want:
        return want
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


def main() -> int:
    """Entry point of ``ldpstream gateway`` and ``python -m gateway``."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: "
                                                   "%(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)
    settings = GatewaySettings.from_env()
    files = raise_open_files_limit(settings.max_connections + 256)
    if files < settings.max_connections + 256:
        log.warning("at most %d open files (ulimit -n): fewer than LDP_GATEWAY_MAX_CONNECTIONS "
                    "(%d) connections can be open", files, settings.max_connections)
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
