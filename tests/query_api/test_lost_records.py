"""What a user of the API sees after records were deleted from Kafka before they were
counted (docs/faults.md): every answer carries ``lost_records`` (n misses those records'
reports) and ``/readyz`` names the partitions, and says whether the janitor releases."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from ldpcore.collection import CollectionSpec
from ldpstream.storage import FLUSH_SCRIPT, CollectionCatalogue, Keys, flush_args
from query_api.app import create_app
from query_api.config import ApiSettings

SPEC = CollectionSpec.from_dict({"id": "lost", "oracle": {"mechanism": "grr", "epsilon": 2.0},
                                 "domain": {"kind": "integers", "low": 0, "high": 3},
                                 "min_reports": 1})


def _flush(redis_client: Any, prefix: str, wm: tuple[int, int], n: int,
           lost: dict[int, tuple[int, int, int]] | None = None) -> None:
    o = SPEC.oracle()
    state = o.aggregate(o.perturb(np.zeros(n, dtype=np.int64), rng=1))
    start = int(time.time()) // SPEC.window_seconds * SPEC.window_seconds
    keys, args = flush_args(Keys(prefix), "rep", {0: wm},
                            {(SPEC.id, start): (state.n, state.counts,
                                                int((time.time() + 86400) * 1000))},
                            int(time.time() * 1000), lost=lost)
    assert redis_client.register_script(FLUSH_SCRIPT)(keys=keys, args=args)[0] == 1


def test_answers_and_readyz_say_that_n_misses_records_lost_before_they_were_counted(
        redis_server: Any, redis_client: Any, ldp_names: dict[str, str]) -> None:
    prefix = ldp_names["prefix"]
    CollectionCatalogue(redis_client, prefix).register(SPEC)
    _flush(redis_client, prefix, (-1, 99), 500)
    settings = ApiSettings(redis_url=redis_server.url, redis_prefix=prefix, version_ttl_s=0.0,
                           max_stale_s=0.0)
    with TestClient(create_app(settings, registry=CollectorRegistry())) as api:
        before = api.get("/v1/collections/lost/frequencies").json()
        assert before["n"] == 500 and "lost_records" not in before
        ready = api.get("/readyz")
        assert ready.status_code == 200 and ready.json() == {"status": "ready"}
        # a worker found offsets 100..139 gone from the log and passed them
        _flush(redis_client, prefix, (99, 160), 300, lost={0: (40, 100, 139)})
        after = api.get("/v1/collections/lost/frequencies").json()
        assert after["n"] == 800 and after["lost_records"] == 40
        assert after["state_version"] != before["state_version"]
        ready = api.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["lost_records"] == 40
        assert ready.json()["lost_partitions"] == {"rep:0": 40}
        redis_client.hset(Keys(prefix).janitor, mapping={
            "releasing": 0, "strategy": "none", "reason": "appendonly is off"})
        assert api.get("/readyz").json()["janitor"] == {
            "releasing": False, "strategy": "none", "reason": "appendonly is off"}
