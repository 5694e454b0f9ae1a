"""The query service: FastAPI app over Redis states, with metrics, SSE and the dashboard.

``create_app(settings)`` builds the app; the Redis client and the Prometheus
registry are owned by its lifespan unless injected (tests inject both).  Routes
(JSON under ``/v1``; OpenAPI at ``/openapi.json``):

* collections: ``GET/POST /v1/collections``, ``GET/DELETE /v1/collections/{id}``
  (POST/DELETE need ``Authorization: Bearer $LDP_ADMIN_TOKEN``);
* estimates: ``…/frequencies``, ``…/subset``, ``…/heavy-hitters``, ``…/range``,
  ``…/quantiles``, ``…/cdf``, ``…/mean``, ``…/histogram``, ``…/stream`` (SSE);
* operations: ``/metrics``, ``/healthz``, ``/readyz``; the dashboard at ``/``.

Every answer is computed once per state version (see :mod:`query_api.store`) and
cached; every error is JSON naming the parameter and what is allowed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import math
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.staticfiles import StaticFiles

import ldpcore
from ldpcore import ParameterError
from ldpcore.collection import CollectionSpec

from . import estimates as E
from .config import ApiSettings
from .errors import (
    Conflict,
    Forbidden,
    NotEnoughReports,
    NotFound,
    QueryError,
    Unauthorized,
    Unavailable,
)
from .metrics import ApiMetrics
from .store import CollectionConflict, StateVersion, Store

__all__ = ["create_app"]

_STATIC = Path(__file__).parent / "static"


def _error(status: int, message: str, parameter: str | None = None,
           **extra: Any) -> JSONResponse:
    body: dict[str, Any] = {"status": status, "message": message}
    if parameter is not None:
        body["parameter"] = parameter
    body.update(extra)
    return JSONResponse({"error": body}, status_code=status)


def _parse_time(raw: str | None, name: str) -> float | None:
    """Epoch seconds or ISO 8601 (``2026-11-22T10:00:00Z``)."""
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        try:
            dt = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise QueryError(f"{name} must be epoch seconds or an ISO 8601 time, got {raw!r}",
                             parameter=name) from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        value = dt.timestamp()
    if not math.isfinite(value):
        raise QueryError(f"{name} must be finite, got {raw!r}", parameter=name)
    return value


def _offset(spec: CollectionSpec) -> int:
    """Value of domain index 0 for integer domains (PEM reports indices)."""
    return int(spec.domain.low) if spec.domain.kind == "integers" else 0


def _labels(spec: CollectionSpec) -> list[str] | None:
    dom = spec.domain
    if dom.size > 1 << 20:  # e.g. a 2^32 heavy-hitter domain: values speak for themselves
        return None
    if dom.kind == "categories":
        return list(dom.labels)
    if dom.kind == "integers":
        return [str(int(dom.low) + i) for i in range(dom.size)]
    width = (dom.high - dom.low) / dom.bins
    return [f"[{dom.low + i * width:g}, {dom.low + (i + 1) * width:g})" for i in range(dom.bins)]


def _to_index(spec: CollectionSpec, raw: str, name: str) -> int:
    """A domain value (label, integer or number) given as a query parameter → index."""
    dom = spec.domain
    try:
        if dom.kind == "categories":
            if raw in dom.labels:
                return dom.labels.index(raw)
            raise ParameterError(f"not one of the labels {list(dom.labels)[:20]}")
        return int(dom.index([float(raw)])[0])
    except (ParameterError, ValueError) as exc:
        allowed = ("a label of the collection" if dom.kind == "categories" else
                   f"a number in [{dom.low:g}, {dom.high:g}]")
        raise QueryError(f"{name} must be {allowed}, got {raw!r} ({exc})",
                         parameter=name) from None


def _index_value(spec: CollectionSpec, idx: int) -> Any:
    dom = spec.domain
    if dom.kind == "categories":
        return dom.labels[idx]
    if dom.kind == "integers":
        return int(dom.low) + idx
    return dom.low + idx * (dom.high - dom.low) / dom.bins  # lower edge of the bin


class _Cache:
    """A small LRU of answers keyed by (collection, fingerprint, version, query)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key: Any) -> Any:
        hit = self.data.get(key)
        if hit is not None:
            self.data.move_to_end(key)
        return hit

    def put(self, key: Any, value: Any) -> None:
        self.data[key] = value
        self.data.move_to_end(key)
        while len(self.data) > self.size:
            self.data.popitem(last=False)


class Service:
    """What the routes share: store, cache, metrics, settings."""

    def __init__(self, settings: ApiSettings, store: Store, metrics: ApiMetrics) -> None:
        self.settings = settings
        self.store = store
        self.metrics = metrics
        self.cache = _Cache(settings.cache_entries)
        self.oracles: dict[str, ldpcore.FrequencyOracle] = {}
        self._versions: dict[Any, tuple[float, StateVersion]] = {}

    async def version(self, spec: CollectionSpec, since: float | None,
                      until: float | None) -> StateVersion:
        """The state version, re-read at most every ``version_ttl_s`` per query window.

        Under load this turns one Redis round trip per request into one per interval;
        answers are at most that much staler than Redis (flushes come every ~200 ms).
        """
        key = (spec.id, spec.fingerprint, since, until)
        now = time.monotonic()
        hit = self._versions.get(key)
        if hit is not None and now - hit[0] < self.settings.version_ttl_s:
            return hit[1]
        version: StateVersion = await self._redis(self.store.version(spec, since, until))
        if len(self._versions) > 4 * self.settings.cache_entries:
            self._versions.clear()
        self._versions[key] = (now, version)
        return version

    async def spec(self, cid: str) -> CollectionSpec:
        spec = await self._redis(self.store.get(cid))
        if spec is None:
            raise NotFound(f"no collection {cid!r}; GET /v1/collections lists them",
                           parameter="id")
        return spec

    def oracle(self, spec: CollectionSpec) -> Any:
        o = self.oracles.get(spec.fingerprint)
        if o is None:
            o = self.oracles[spec.fingerprint] = spec.oracle()
        return o

    async def _redis(self, aw: Awaitable[Any]) -> Any:
        try:
            out = await aw
        except (ConnectionError, OSError, TimeoutError) as exc:
            self.metrics.redis_up.set(0)
            raise Unavailable(f"Redis is unreachable: {exc}") from None
        except Exception as exc:  # redis-py's own connection errors
            if type(exc).__module__.startswith("redis"):
                self.metrics.redis_up.set(0)
                raise Unavailable(f"Redis error: {exc}") from None
            raise
        self.metrics.redis_up.set(1)
        return out

    async def answer(self, spec: CollectionSpec, query: str, params: tuple[Any, ...],
                     since: float | None, until: float | None,
                     compute: Callable[[Any, ldpcore.State], dict[str, Any]],
                     *, version: StateVersion | None = None) -> Response:
        """The cached JSON answer of ``compute(oracle, state)`` for the current state version.

        The encoded bytes are cached, so a hit costs one Redis round trip (the version).
        """
        body, hit, tag = await self.answer_bytes(spec, query, params, since, until, compute,
                                                 version=version)
        return Response(body, media_type="application/json",
                        headers={"X-Cache": "hit" if hit else "miss", "X-State-Version": tag})

    async def answer_bytes(self, spec: CollectionSpec, query: str, params: tuple[Any, ...],
                           since: float | None, until: float | None,
                           compute: Callable[[Any, ldpcore.State], dict[str, Any]],
                           *, version: StateVersion | None = None) -> tuple[bytes, bool, str]:
        if version is None:
            version = await self.version(spec, since, until)
        key = (spec.id, spec.fingerprint, version.tag, query, params, since, until)
        hit = self.cache.get(key)
        if hit is not None:
            self.metrics.cache_hits.inc()
            return hit, True, version.tag
        self.metrics.cache_misses.inc()
        skey = (spec.id, spec.fingerprint, version.tag, "state", since, until)
        state = self.cache.get(skey)
        if state is None:
            state = await self._redis(self.store.state(spec, version))
            self.cache.put(skey, state)
        self.metrics.reports.labels(spec.id).set(state.n)
        self.metrics.epsilon.labels(spec.id).set(float(spec.oracle_spec["epsilon"]))
        if version.last_flush_ms:
            self.metrics.staleness.labels(spec.id).set(
                max(0.0, time.time() - version.last_flush_ms / 1000))
        if state.n < spec.min_reports:
            raise NotEnoughReports(state.n, spec.min_reports)
        t0 = time.perf_counter()
        body = compute(self.oracle(spec), state)
        out = {
            "collection": spec.id, "fingerprint": spec.fingerprint,
            "mechanism": spec.oracle_spec["mechanism"],
            "epsilon": spec.oracle_spec["epsilon"], "n": state.n,
            "windows": len(version.windows),
            "since": since, "until": until,
            "as_of": (datetime.fromtimestamp(version.last_flush_ms / 1000, UTC).isoformat()
                      if version.last_flush_ms else None),
            "state_version": version.tag, **body,
        }
        encoded = json.dumps(out, separators=(",", ":"), allow_nan=False).encode()
        self.metrics.estimate_seconds.labels(spec.id, query).observe(time.perf_counter() - t0)
        self.cache.put(key, encoded)
        return encoded, False, version.tag


def _service(request: Request) -> Service:
    svc: Service = request.app.state.service
    return svc


def _check_admin(request: Request, settings: ApiSettings) -> None:
    if settings.admin_token is None:
        raise Forbidden("admin routes are disabled: start the API with LDP_ADMIN_TOKEN set")
    auth = request.headers.get("authorization", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("send 'Authorization: Bearer <LDP_ADMIN_TOKEN>'",
                           parameter="Authorization")
    if not hmac.compare_digest(token.encode(), settings.admin_token.encode()):
        raise Forbidden("the bearer token is not the admin token", parameter="Authorization")


def _summary(spec: CollectionSpec) -> dict[str, Any]:
    o = spec.oracle_spec
    return {"id": spec.id, "description": spec.description, "mechanism": o["mechanism"],
            "epsilon": o["epsilon"], "domain": spec.domain.to_dict() | (
                {"labels": list(spec.domain.labels)[:50]} if spec.domain.kind == "categories"
                else {}),
            "domain_size": spec.domain.size, "fingerprint": spec.fingerprint,
            "queries": _queries(spec)}


def _queries(spec: CollectionSpec) -> list[str]:
    o = spec.oracle()
    out = (["frequencies", "subset", "heavy-hitters"]
           if getattr(o, "answers_frequencies", True) else [])
    if hasattr(o, "heavy_hitters"):
        out.append("heavy-hitters")
    if hasattr(o, "range_query"):
        out += ["range", "quantiles", "cdf", "histogram"]
    if hasattr(o, "mean"):
        out += ["mean", "quantiles", "cdf", "histogram"]
    return sorted(set(out))


def create_app(settings: ApiSettings | None = None, *, redis: Any = None,
               registry: CollectorRegistry | None = None) -> FastAPI:
    """Build the app.  ``redis`` (a ``redis.asyncio.Redis``) and ``registry`` may be injected."""
    settings = settings or ApiSettings.from_env()
    registry = registry if registry is not None else CollectorRegistry()
    metrics = ApiMetrics(registry)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = redis is None
        if owned:
            import redis.asyncio as aredis
            client = aredis.Redis.from_url(settings.redis_url, socket_timeout=5,
                                           socket_connect_timeout=3, health_check_interval=10,
                                           **settings.redis_options.kwargs())
        else:
            client = redis
        app.state.service = Service(settings, Store(client, settings.redis_prefix), metrics)
        try:
            yield
        finally:
            if owned:
                await client.aclose()

    app = FastAPI(title="ldpstream query API", version="1",
                  description="Live, post-processed estimates of ε-LDP telemetry.",
                  lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.metrics = metrics

    # ---- errors -------------------------------------------------------------------------
    @app.exception_handler(QueryError)
    async def _query_error(request: Request, exc: QueryError) -> JSONResponse:
        extra = {"have": exc.have, "need": exc.need} if isinstance(exc, NotEnoughReports) else {}
        return _error(exc.status, str(exc), exc.parameter, **extra)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        loc = [str(x) for x in first.get("loc", ()) if x not in ("query", "path", "body")]
        param = ".".join(loc) or None
        return _error(400, f"parameter {param!r}: {first.get('msg', 'invalid')} "
                           f"(got {first.get('input')!r})", param)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        msg = str(exc.detail)
        if exc.status_code == 404:
            msg = f"no route {request.url.path!r}; see /openapi.json"
        elif exc.status_code == 405:
            msg = f"method {request.method} is not allowed on {request.url.path!r}"
        return _error(exc.status_code, msg)

    # ---- request metrics (pure ASGI: no per-request task overhead) ---------------------
    inner = app.build_middleware_stack

    def build() -> Any:
        asgi = inner()

        async def timed(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await asgi(scope, receive, send)
                return
            status = [500]

            async def send_wrapper(message: Any) -> None:
                if message["type"] == "http.response.start":
                    status[0] = message["status"]
                await send(message)

            t0 = time.perf_counter()
            try:
                await asgi(scope, receive, send_wrapper)
            finally:
                route = scope.get("route")
                path = getattr(route, "path", "unmatched")
                if path != "/v1/collections/{cid}/stream":
                    metrics.request_seconds.labels(path, scope["method"], str(status[0])
                                                   ).observe(time.perf_counter() - t0)
        return timed

    app.build_middleware_stack = build  # type: ignore[method-assign]

    # ---- operations -----------------------------------------------------------------------
    @app.get("/healthz", tags=["operations"])
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["operations"])
    async def readyz(request: Request) -> Any:
        """Readiness: Redis answers a PING."""
        svc = _service(request)
        try:
            await svc._redis(svc.store.ping())
        except Unavailable as exc:
            return _error(503, str(exc))
        return {"status": "ready"}

    @app.get("/metrics", tags=["operations"])
    async def metrics_route(request: Request) -> Response:
        """Prometheus text exposition; pings Redis first so ``ldp_redis_up`` is current."""
        svc = _service(request)
        with contextlib.suppress(Unavailable):  # the gauge records the failure
            await svc._redis(asyncio.wait_for(svc.store.ping(), 1.0))
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/", include_in_schema=False)
    async def dashboard() -> HTMLResponse:
        return HTMLResponse((_STATIC / "index.html").read_text())

    app.mount("/static", StaticFiles(directory=_STATIC), name="static")

    # ---- collections ------------------------------------------------------------------
    @app.get("/v1/collections", tags=["collections"])
    async def list_collections(request: Request) -> dict[str, Any]:
        """Every registered collection, with its mechanism, ε and the queries it answers."""
        svc = _service(request)
        specs = await svc._redis(svc.store.all())
        return {"collections": [_summary(s) for s in specs]}

    @app.post("/v1/collections", tags=["collections"], status_code=201)
    async def create_collection(request: Request) -> Any:
        """Register a collection spec (admin). 201 created, 200 if the same spec exists."""
        svc = _service(request)
        _check_admin(request, svc.settings)
        try:
            raw = await request.json()
        except ValueError:
            raise QueryError("the body must be a JSON collection spec",
                             parameter="body") from None
        try:
            spec = CollectionSpec.from_dict(raw)
        except ParameterError as exc:
            raise QueryError(f"invalid collection spec: {exc}", parameter="body") from None
        try:
            created = await svc._redis(svc.store.register(spec))
        except CollectionConflict as exc:
            raise Conflict(str(exc), parameter="id") from None
        body = {"spec": json.loads(spec.to_json()), "created": created}
        return JSONResponse(body, status_code=201 if created else 200)

    @app.get("/v1/collections/{cid}", tags=["collections"])
    async def get_collection(request: Request, cid: str) -> dict[str, Any]:
        """The full spec with its fingerprint (what devices need to report)."""
        spec = await _service(request).spec(cid)
        return {"spec": json.loads(spec.to_json()), **_summary(spec)}

    @app.delete("/v1/collections/{cid}", tags=["collections"])
    async def delete_collection(request: Request, cid: str) -> dict[str, Any]:
        """Remove a collection and its stored states (admin)."""
        svc = _service(request)
        _check_admin(request, svc.settings)
        if not await svc._redis(svc.store.delete(cid)):
            raise NotFound(f"no collection {cid!r}", parameter="id")
        return {"deleted": cid}

    # ---- estimates --------------------------------------------------------------------
    Since = Query(None, description="start: epoch seconds or ISO 8601 (windows overlapping)")
    Until = Query(None, description="end (exclusive): epoch seconds or ISO 8601")
    Conf = Query(0.95, gt=0, lt=1, description="confidence level of the intervals")

    def _method(method: str | None, task: str) -> str:
        return method if method is not None else E.default_method(task)

    @app.get("/v1/collections/{cid}/frequencies", tags=["estimates"])
    async def frequencies(request: Request, cid: str,
                          method: str | None = Query(
                              None, description="post-processing; default: the paper's "
                              "guideline for full-domain queries"),
                          since: str | None = Since, until: str | None = Until,
                          confidence: float = Conf,
                          top: int | None = Query(None, ge=1, description="only the top k")
                          ) -> Response:
        """Per value: estimate, standard error and confidence interval."""
        svc = _service(request)
        spec = await svc.spec(cid)
        m = _method(method, "full")
        E._check_method(m)
        labels = _labels(spec)
        return await svc.answer(
            spec, "frequencies", (m, confidence, top), _parse_time(since, "since"),
            _parse_time(until, "until"),
            lambda o, s: E.frequencies(o, s, labels=labels, method=m, confidence=confidence,
                                       top=top))

    @app.get("/v1/collections/{cid}/subset", tags=["estimates"])
    async def subset(request: Request, cid: str,
                     labels: str = Query(..., description="comma-separated domain values"),
                     method: str | None = Query(None, description="post-processing; default: "
                                                "the guideline for set queries"),
                     since: str | None = Since, until: str | None = Until,
                     confidence: float = Conf) -> Response:
        """Frequency of a set of values (set-value query); every method incl. post-pos."""
        svc = _service(request)
        spec = await svc.spec(cid)
        m = _method(method, "set")
        E._check_method(m)
        items = [x for x in labels.split(",") if x != ""]
        if not items:
            raise QueryError("labels must name at least one domain value", parameter="labels")
        idx = sorted({_to_index(spec, x, "labels") for x in items})
        return await svc.answer(
            spec, "subset", (m, confidence, tuple(idx)), _parse_time(since, "since"),
            _parse_time(until, "until"),
            lambda o, s: {"labels": items, **E.subset(o, s, idx, method=m,
                                                      confidence=confidence)})

    @app.get("/v1/collections/{cid}/heavy-hitters", tags=["estimates"])
    async def heavy_hitters(request: Request, cid: str,
                            k: int = Query(10, ge=1, le=10_000, description="how many"),
                            since: str | None = Since, until: str | None = Until
                            ) -> Response:
        """The k most frequent values with estimates and standard errors."""
        svc = _service(request)
        spec = await svc.spec(cid)
        labels = _labels(spec)
        return await svc.answer(spec, "heavy-hitters", (k,), _parse_time(since, "since"),
                                _parse_time(until, "until"),
                                lambda o, s: E.heavy_hitters(o, s, k, labels=labels,
                                                             offset=_offset(spec)))

    @app.get("/v1/collections/{cid}/range", tags=["estimates"])
    async def range_(request: Request, cid: str,
                     low: str = Query(..., description="lowest domain value (inclusive)"),
                     high: str = Query(..., description="highest domain value (inclusive)"),
                     since: str | None = Since, until: str | None = Until,
                     confidence: float = Conf) -> Response:
        """Fraction of values in [low, high] (range-capable mechanisms: hh, haar)."""
        svc = _service(request)
        spec = await svc.spec(cid)
        lo, hi = _to_index(spec, low, "low"), _to_index(spec, high, "high")
        if lo > hi:
            raise QueryError(f"low must not exceed high (low={low}, high={high})",
                             parameter="low")
        return await svc.answer(
            spec, "range", (lo, hi, confidence), _parse_time(since, "since"),
            _parse_time(until, "until"),
            lambda o, s: E.range_answer(o, s, lo, hi, confidence=confidence)
            | {"low": low, "high": high})

    @app.get("/v1/collections/{cid}/quantiles", tags=["estimates"])
    async def quantiles(request: Request, cid: str,
                        q: list[float] = Query([0.5], description="levels in [0, 1]"),
                        since: str | None = Since, until: str | None = Until
                        ) -> Response:
        """Quantiles of an ordered domain (hh, haar)."""
        svc = _service(request)
        spec = await svc.spec(cid)

        def compute(o: Any, s: ldpcore.State) -> dict[str, Any]:
            out = E.quantiles(o, s, q)
            for row in out["quantiles"]:
                if isinstance(row["value"], int):
                    row["index"] = row["value"]
                    row["value"] = _index_value(spec, row["index"])
            return out
        return await svc.answer(spec, "quantiles", tuple(q), _parse_time(since, "since"),
                                _parse_time(until, "until"), compute)

    @app.get("/v1/collections/{cid}/cdf", tags=["estimates"])
    async def cdf(request: Request, cid: str, since: str | None = Since,
                  until: str | None = Until) -> Response:
        """Cumulative distribution over the ordered domain (hh, haar)."""
        svc = _service(request)
        spec = await svc.spec(cid)
        labels = _labels(spec)
        return await svc.answer(spec, "cdf", (), _parse_time(since, "since"),
                                _parse_time(until, "until"),
                                lambda o, s: E.cdf(o, s) | {"labels": labels})

    @app.get("/v1/collections/{cid}/mean", tags=["estimates"])
    async def mean(request: Request, cid: str, since: str | None = Since,
                   until: str | None = Until, confidence: float = Conf) -> Response:
        """Mean of a numeric collection (numeric mechanisms)."""
        svc = _service(request)
        spec = await svc.spec(cid)
        return await svc.answer(spec, "mean", (confidence,), _parse_time(since, "since"),
                                _parse_time(until, "until"),
                                lambda o, s: E.mean(o, s, confidence=confidence))

    @app.get("/v1/collections/{cid}/histogram", tags=["estimates"])
    async def histogram(request: Request, cid: str, since: str | None = Since,
                        until: str | None = Until) -> Response:
        """Distribution over the domain's bins (range and numeric mechanisms)."""
        svc = _service(request)
        spec = await svc.spec(cid)
        labels = _labels(spec)
        return await svc.answer(spec, "histogram", (), _parse_time(since, "since"),
                                _parse_time(until, "until"),
                                lambda o, s: E.histogram(o, s) | {"labels": labels})

    @app.get("/v1/collections/{cid}/stream", tags=["estimates"])
    async def stream(request: Request, cid: str,
                     method: str | None = Query(None, description="post-processing method"),
                     confidence: float = Conf,
                     top: int | None = Query(None, ge=1, description="only the top k")
                     ) -> StreamingResponse:
        """Server-Sent Events: an ``estimates`` event whenever the stored state changes."""
        svc = _service(request)
        spec = await svc.spec(cid)
        m = _method(method, "full")
        E._check_method(m)
        labels = _labels(spec)
        ranged = "cdf" in _queries(spec)

        def compute(o: Any, s: ldpcore.State) -> dict[str, Any]:
            if hasattr(o, "mean"):  # numeric: distribution (if any) and mean
                return E.numeric_summary(o, s, confidence=confidence)
            if not getattr(o, "answers_frequencies", True):  # huge domain: heavy hitters
                return E.heavy_hitter_rows(o, s, top or 20, confidence=confidence,
                                           offset=_offset(spec))
            body = E.frequencies(o, s, labels=labels, method=m, confidence=confidence,
                                 top=top)
            if ranged:
                body["cdf"] = E.cdf(o, s)["cdf"]
                d = o.domain_size
                pts = sorted({round(i * (d - 1) / 63) for i in range(64)})
                body["cdf_se"] = [[i, math.sqrt(float(o.range_variance(s.n, 0, i)))]
                                  for i in pts]
            return body

        async def events() -> AsyncIterator[bytes]:
            last: str | None = None
            idle = 0.0
            yield b"retry: 2000\n\n"
            while not await request.is_disconnected():
                try:
                    version = await svc._redis(svc.store.version(spec, None, None))
                    if version.tag != last:
                        last = version.tag
                        try:
                            body, _, _ = await svc.answer_bytes(
                                spec, "stream", (m, confidence, top), None, None, compute,
                                version=version)
                            yield b"event: estimates\ndata: " + body + b"\n\n"
                        except NotEnoughReports as exc:
                            data = {"have": exc.have, "need": exc.need, "message": str(exc)}
                            yield f"event: waiting\ndata: {json.dumps(data)}\n\n".encode()
                        idle = 0.0
                except Unavailable as exc:
                    yield f"event: error\ndata: {json.dumps({'message': str(exc)})}\n\n".encode()
                idle += svc.settings.stream_interval_s
                if idle >= 15:
                    idle = 0.0
                    yield b": keep-alive\n\n"
                await asyncio.sleep(svc.settings.stream_interval_s)

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache",
                                          "X-Accel-Buffering": "no"})

    @app.get("/v1/methods", tags=["estimates"])
    async def methods() -> dict[str, Any]:
        """Post-processing methods and the paper's guideline per task."""
        return {"methods": list(ldpcore.POSTPROCESS_METHODS),
                "guideline": {t: E.default_method(t) for t in ("full", "frequent", "set")}}

    return app
