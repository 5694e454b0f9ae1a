"""``ldpstream issuer``: the HTTP face of token issuance (contract: docs/privacy-pass.md).

=====================================================  =========================================
``GET /.well-known/private-token-issuer-directory``    RFC 9578 §4 directory (media type
                                                       ``application/private-token-issuer-
                                                       directory``); ``?collection=c`` makes sure
                                                       c's keys for the current and prefetch
                                                       windows exist first
``POST /token-request?collection=c[&window=w]``        body ``application/private-token-request``:
                                                       1..quota TokenRequests; answer
                                                       ``application/private-token-response``:
                                                       as many TokenResponses, in order
``GET /healthz``, ``GET /readyz``, ``GET /metrics``    liveness, Redis reachable, Prometheus
=====================================================  =========================================
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ldpstream.privacypass import scheme
from ldpstream.privacypass.tokens import TOKEN_REQUEST_LEN, TOKEN_TYPE

from .attest import AttestationError
from .budget import IssuerBudget
from .config import IssuerSettings
from .service import IssuanceError, KeyManager, Quotas, SpecCache, decode_requests, sign_requests

__all__ = ["create_app", "DIRECTORY_PATH", "REQUEST_PATH", "REQUEST_TYPE", "RESPONSE_TYPE",
           "DIRECTORY_TYPE"]

log = logging.getLogger("ldpstream.issuer")

DIRECTORY_PATH = "/.well-known/private-token-issuer-directory"
REQUEST_PATH = "/token-request"
DIRECTORY_TYPE = "application/private-token-issuer-directory"
REQUEST_TYPE = "application/private-token-request"
RESPONSE_TYPE = "application/private-token-response"

_EPS = """
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local add = tonumber(ARGV[1])
if cur + add > tonumber(ARGV[2]) + 1e-9 then return tostring(-1 - cur) end
redis.call('INCRBYFLOAT', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], 172800)
return tostring(cur + add)
"""


def _error(status: int, reason: str, detail: str,
           headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail, "reason": reason}, status_code=status,
                        headers=headers)


class _Issuer:
    """What the routes share: the settings, the clients the lifespan makes and the metrics."""

    def __init__(self, settings: IssuerSettings, redis: Any = None) -> None:
        self.settings = settings
        self._given_redis = redis
        self.state: dict[str, Any] = {}
        self.registry = CollectorRegistry()
        self.issued = Counter("ldp_issuer_tokens_issued", "Tokens signed", ["collection"],
                              registry=self.registry)
        self.refused = Counter("ldp_issuer_refused", "Token requests refused", ["reason"],
                               registry=self.registry)
        self.keys_created = Counter("ldp_issuer_keys_created", "Issuer keys generated",
                                    registry=self.registry)

    @asynccontextmanager
    async def lifespan(self, app: FastAPI) -> AsyncIterator[None]:
        import redis.asyncio as aioredis

        settings, state = self.settings, self.state
        rds = self._given_redis if self._given_redis is not None else aioredis.Redis.from_url(
            settings.redis_url, socket_timeout=5, **settings.redis_options.kwargs())
        state["redis"] = rds
        state["keys"] = KeyManager(rds, settings.redis_prefix, skew=settings.skew,
                                   password=settings.key_password)
        state["quotas"] = Quotas(rds, settings.redis_prefix, skew=settings.skew)
        state["specs"] = SpecCache(rds, settings.redis_prefix)
        state["eps"] = rds.register_script(_EPS)
        state["budget"] = IssuerBudget(rds, settings.redis_prefix)
        try:
            yield
        finally:
            if self._given_redis is None:
                await rds.aclose()

    def windows_for(self, spec: Any, now: float) -> list[int]:
        w0 = scheme.window_of(now, spec.window_seconds)
        return [w0 + i * spec.window_seconds
                for i in range(self.settings.prefetch_windows + 1)]

    async def spec_of(self, cid: str | None) -> Any:
        if not cid:
            raise IssuanceError(400, "collection", "the query parameter 'collection' is "
                                "required (the collection the tokens are for)")
        try:
            spec = await self.state["specs"].get(cid)
        except Exception as exc:  # noqa: BLE001 - an unreadable catalogue entry
            raise IssuanceError(503, "unavailable", f"the catalogue cannot be read: {exc!r}") \
                from None
        if spec is None:
            raise IssuanceError(404, "unknown_collection", f"no collection {cid!r}")
        return spec

    def entry(self, rec: scheme.KeyRecord) -> dict[str, Any]:
        skew = self.settings.skew
        return {"token-type": TOKEN_TYPE, "token-key": rec.token_key,
                "not-before": rec.window - skew,
                "ldp-collection": rec.collection, "ldp-window": rec.window,
                "ldp-window-seconds": rec.window_seconds,
                "ldp-not-after": rec.end + skew}

    async def key(self, spec: Any, window: int) -> Any:
        """The issuer key of ``spec`` for ``window``, made (and counted) if new."""
        km: KeyManager = self.state["keys"]
        before = km.created
        key = await km.get(spec, window)
        self.keys_created.inc(km.created - before)
        return key

    async def directory(self, collection: str | None) -> Response:
        now = time.time()
        if collection is not None:
            spec = await self.spec_of(collection)
            recs = [(await self.key(spec, w)).record for w in self.windows_for(spec, now)]
        else:
            recs = []
            for cid in await self.state["specs"].ids():
                spec = await self.state["specs"].get(cid)
                if spec is not None:
                    recs += await self.state["keys"].published(cid, self.windows_for(spec, now))
        body = {"issuer-request-uri": REQUEST_PATH,
                "token-keys": [self.entry(r) for r in recs],
                "ldp-issuer-name": self.settings.issuer_name,
                "ldp-skew-seconds": self.settings.skew}
        max_age = min([max(1, r.end - int(now)) for r in recs] or [60])
        import json

        return Response(json.dumps(body), media_type=DIRECTORY_TYPE,
                        headers={"Cache-Control": f"max-age={min(max_age, 300)}"})

    async def token_request(self, request: Request, collection: str | None,
                            window: int | None) -> Response:
        ctype = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
        if ctype != REQUEST_TYPE:
            raise IssuanceError(415, "media_type", f"Content-Type must be {REQUEST_TYPE}")
        try:
            device = self.settings.attester.attest(request.headers)
        except AttestationError as exc:
            raise IssuanceError(exc.status, exc.reason, exc.detail) from None
        spec = await self.spec_of(collection)
        now = time.time()
        allowed = self.windows_for(spec, now)
        w = allowed[0] if window is None else window
        if w not in allowed:
            raise IssuanceError(400, "window", f"tokens of {spec.id!r} are issued for the "
                                f"windows {allowed} (current first), not {w}")
        body = await _read_requests(request, spec)
        key = await self.key(spec, w)
        reqs = decode_requests(body, key, spec.token_quota)
        n = len(reqs)
        quotas: Quotas = self.state["quotas"]
        await quotas.reserve(device, spec, w, n)
        try:
            await self.spend_epsilon(device, spec, n, now)
            loop = asyncio.get_running_loop()
            out = await loop.run_in_executor(None, sign_requests, key, reqs)
        except BaseException:
            await quotas.release(device, spec, w, n)
            raise
        self.issued.labels(spec.id).inc(n)
        return Response(out, media_type=RESPONSE_TYPE,
                        headers={"Cache-Control": "no-store"})

    async def spend_epsilon(self, device: str, spec: Any, n: int, now: float) -> None:
        charged = await self.state["budget"].charge(device, spec, n, now)
        if charged is None:  # the fleet has no budget
            return
        cost, fleet, counted = charged
        budget = fleet.epsilon_per_day
        day = int(now // 86400)
        key = f"{self.settings.redis_prefix}pp:eps:{device}:{day}"
        got = float(await self.state["eps"](keys=[key], args=[repr(cost), repr(budget)]))
        if got < 0:
            await self.state["budget"].undo(counted, n)
            raise IssuanceError(429, "budget", f"this device has spent {-1 - got:g} of its "
                                f"daily ε budget {budget:g}; {n} report(s) of {spec.id!r} "
                                f"need {cost:g}")

    async def ready(self) -> JSONResponse:
        try:
            ok = bool(await asyncio.wait_for(self.state["redis"].ping(), 2.0))
        except Exception:  # noqa: BLE001 - a probe
            ok = False
        return JSONResponse({"status": "ok" if ok else "unavailable", "redis": ok,
                             "attester": self.settings.attester_name},
                            status_code=200 if ok else 503)


async def _read_requests(request: Request, spec: Any) -> bytes:
    """The request body, refused as soon as it holds more than the quota's TokenRequests."""
    limit = TOKEN_REQUEST_LEN * spec.token_quota
    body = b""
    async for chunk in request.stream():  # read no more than the quota's worth
        body += chunk
        if len(body) > limit:
            raise IssuanceError(400, "too_many", f"more than {spec.token_quota} "
                                "TokenRequests, the quota per window")
    return body


def _add_error_handlers(app: FastAPI, issuer: _Issuer) -> None:
    @app.exception_handler(RequestValidationError)
    async def _bad_parameter(request: Request, exc: RequestValidationError) -> JSONResponse:
        where = ", ".join(".".join(str(p) for p in e.get("loc", ())) for e in exc.errors())
        issuer.refused.labels("bad_request").inc()
        return _error(400, "bad_request", f"bad parameter(s): {where} (window: epoch seconds "
                      "of a window start; collection: an id)")

    @app.exception_handler(IssuanceError)
    async def _issuance_error(request: Request, exc: IssuanceError) -> JSONResponse:
        issuer.refused.labels(exc.reason).inc()
        return _error(exc.status, exc.reason, exc.detail, exc.headers)


def create_app(settings: IssuerSettings, redis: Any = None) -> FastAPI:
    """The issuer app; ``redis`` (an asyncio client) is made from the settings unless given."""
    issuer = _Issuer(settings, redis)
    app = FastAPI(title="ldpstream issuer", lifespan=issuer.lifespan, docs_url=None,
                  redoc_url=None, openapi_url=None)
    _add_error_handlers(app, issuer)

    @app.get(DIRECTORY_PATH)
    async def directory(collection: str | None = None) -> Response:
        return await issuer.directory(collection)

    @app.post(REQUEST_PATH)
    async def token_request(request: Request, collection: str | None = None,
                            window: int | None = None) -> Response:
        return await issuer.token_request(request, collection, window)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        return await issuer.ready()

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(issuer.registry), media_type=CONTENT_TYPE_LATEST)

    return app


def main() -> int:
    """Entry point of ``ldpstream issuer``."""
    import socket
    import sys

    import uvicorn

    from ldpstream.settings import ConfigError

    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = IssuerSettings.from_env()  # fails loudly, naming the bad variable
    except ConfigError as exc:
        print(f"ldpstream issuer: configuration error: {exc}", file=sys.stderr)
        return 2
    sock = socket.socket(socket.AF_INET6 if ":" in settings.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((settings.host, settings.port))
    sock.listen(1024)  # connections wait in the backlog until uvicorn serves them
    port = sock.getsockname()[1]
    print(f"ldpstream issuer: listening on http://{settings.host}:{port} (issuer name "
          f"{settings.issuer_name!r}, attester: {settings.attester_name})", flush=True)
    config = uvicorn.Config(create_app(settings), log_level="warning", access_log=False,
                            timeout_graceful_shutdown=3)
    uvicorn.Server(config).run(sockets=[sock])
    return 0
