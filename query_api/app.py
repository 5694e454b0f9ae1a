"""The query service: a short FastAPI factory over routers, a service and its lifespan.

``create_app(settings)`` builds the app; the Redis client and the Prometheus
registry are owned by its lifespan unless injected (tests inject both).  Routes
(JSON under ``/v1``; OpenAPI at ``/openapi.json``):

* collections (:mod:`query_api.routes.collections`): ``GET/POST /v1/collections``,
  ``GET/DELETE /v1/collections/{id}`` (POST/DELETE need the admin bearer token);
* estimates (:mod:`query_api.routes.estimates`, :mod:`query_api.routes.stream`):
  ``…/frequencies``, ``…/subset``, ``…/heavy-hitters``, ``…/range``, ``…/quantiles``,
  ``…/cdf``, ``…/mean``, ``…/histogram``, ``…/stream`` (SSE), ``/v1/methods``;
  ``…/series`` (:mod:`query_api.routes.series`): any estimate over time, per bucket;
* fleet (:mod:`query_api.routes.fleet`): ``GET/PUT /v1/fleet``, the per-device daily
  privacy budget (every estimate answer states it too);
* operations (:mod:`query_api.routes.operations`): ``/metrics``, ``/healthz``,
  ``/readyz``; the dashboard at ``/``.

Every read router depends on :func:`query_api.access.require_reader` (read tokens,
private collections); ``/metrics`` may have its own port (:func:`create_metrics_app`).

Browsers on other origins: :class:`query_api.middleware.Cors` (``LDP_CORS_ORIGINS``).

Every answer is computed once per state version (:mod:`query_api.service`) and
cached; every error is JSON naming the parameter and what is allowed.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from prometheus_client import CollectorRegistry
from starlette.staticfiles import StaticFiles

from . import routes
from .access import ReadAccess, require_reader
from .config import ApiSettings
from .errors import install_error_handlers
from .metrics import ApiMetrics
from .middleware import Cors, HeadAsGet, RequestMetrics
from .openapi import build_openapi
from .routes.operations import STATIC
from .schemas import errors
from .service import Service
from .store import Store

__all__ = ["create_app"]


def _redis_client(settings: ApiSettings) -> Any:
    # RESP2: a window's HGETALL (thousands of cells) comes back as a flat array, which
    # hiredis parses in about half the CPU of the RESP3 map redis-py 8 asks for by default
    # (a 16,815-cell window: 7.6 ms instead of 16 ms); the API uses nothing of RESP3.
    return settings.redis_options.connect_async(settings.redis_url, socket_timeout=5,
                                                socket_connect_timeout=3, health_check_interval=10,
                                                protocol=2)


def create_app(settings: ApiSettings | None = None, *, redis: Any = None,
               registry: CollectorRegistry | None = None) -> FastAPI:
    """Build the app.  ``redis`` (a ``redis.asyncio.Redis``) and ``registry`` may be injected."""
    settings = settings or ApiSettings.from_env()
    metrics = ApiMetrics(registry if registry is not None else CollectorRegistry())

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        client = redis if redis is not None else _redis_client(settings)
        store = Store(client, settings.redis_prefix, spec_ttl=settings.version_ttl_s)
        app.state.service = Service(settings, store, metrics)
        app.state.access = ReadAccess(settings, client, settings.redis_prefix)
        try:
            yield
        finally:
            app.state.service.close()
            if redis is None:
                await client.aclose()

    app = FastAPI(title="ldpstream query API", version="1",
                  description="Live, post-processed estimates of ε-LDP telemetry.",
                  lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.metrics = metrics
    install_error_handlers(app)
    app.add_middleware(HeadAsGet)
    if settings.cors_origins:  # preflights are answered there, before any route
        app.add_middleware(Cors, origins=settings.cors_origins)
    app.add_middleware(RequestMetrics, metrics=metrics)
    app.include_router(routes.operations)
    # Every route of these routers but two names its collection (SpecDep), whose get_spec
    # checks the reader: a router dependency would check it again, one more dependency
    # node on every request (~0.1 ms); the two others (/methods, /mechanisms) name it.
    named = (routes.estimates, routes.series, routes.stream, routes.attributes,
             routes.setvalued)
    for router in (routes.collections, routes.estimates, routes.series, routes.stream,
                   routes.attributes, routes.setvalued, routes.fleet):
        app.include_router(router, responses=errors(401), dependencies=(
            None if router in named else [Depends(require_reader)]))
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    _serve_docs(app)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def create_metrics_app(app: FastAPI) -> FastAPI:
    """``/metrics`` (every collection) and ``/healthz`` of ``app`` for their own port
    (``LDP_API_METRICS_PORT``: reachable by Prometheus, not by readers)."""
    from .routes.operations import PrometheusResponse, render_metrics

    side = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @side.get("/metrics", response_class=PrometheusResponse)
    async def metrics() -> PrometheusResponse:
        svc = getattr(app.state, "service", None)
        if svc is None:  # the API is still starting
            return PrometheusResponse(b"", status_code=503)
        return await render_metrics(svc, include_private=True)

    @side.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return side


def _openapi(app: FastAPI) -> dict[str, Any]:
    """The document (:mod:`query_api.openapi`), built once."""
    if app.openapi_schema is None:
        app.openapi_schema = build_openapi(app)
    return app.openapi_schema


def _serve_docs(app: FastAPI) -> None:
    """``/docs``: Swagger UI from the swagger-ui-bundle package's files (no CDN)."""
    import swagger_ui_bundle

    app.mount("/docs-assets", StaticFiles(directory=swagger_ui_bundle.swagger_ui_path),
              name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{app.title} — docs",
                                   swagger_js_url="/docs-assets/swagger-ui-bundle.js",
                                   swagger_css_url="/docs-assets/swagger-ui.css",
                                   swagger_favicon_url="/docs-assets/favicon-32x32.png")
