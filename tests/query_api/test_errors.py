"""query_api.errors: every failure is a JSON body naming its status and parameter."""

from __future__ import annotations

import json

from fastapi import FastAPI
from fastapi.testclient import TestClient

from query_api.errors import (
    NotEnoughReports,
    QueryError,
    error_response,
    install_error_handlers,
    unknown_collection,
)


def _app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/q")
    def q(k: int = 1) -> dict[str, int]:
        if k < 0:
            raise QueryError("k must be >= 0", parameter="k")
        if k == 0:
            raise NotEnoughReports(3, 100)
        raise unknown_collection("nope")

    return app


def test_query_errors_are_json_with_their_status_and_parameter() -> None:
    with TestClient(_app()) as c:
        r = c.get("/q", params={"k": -1})
        assert r.status_code == 400
        assert r.json() == {"error": {"status": 400, "message": "k must be >= 0",
                                      "parameter": "k"}}
        r = c.get("/q", params={"k": 0})
        assert r.status_code == 409
        body = r.json()["error"]
        assert (body["have"], body["need"]) == (3, 100)
        r = c.get("/q")
        assert r.status_code == 404 and "GET /v1/collections" in r.json()["error"]["message"]


def test_validation_unknown_routes_and_methods_are_json_too() -> None:
    with TestClient(_app()) as c:
        r = c.get("/q", params={"k": "x"})
        assert r.status_code == 400 and "'k'" in r.json()["error"]["message"]
        assert c.get("/nowhere").json()["error"]["status"] == 404
        r = c.post("/q")
        assert r.status_code == 405 and "GET" in r.headers["allow"]


def test_error_response_leaves_out_a_missing_parameter() -> None:
    body = json.loads(bytes(error_response(503, "down").body))
    assert body == {"error": {"status": 503, "message": "down"}}
