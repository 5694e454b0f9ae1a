"""query_api.bench (``ldpstream bench api``): its collections, states and request paths.

The benchmark itself runs the API as a process for tens of seconds (docs/benchmarks.md);
these check the parts it is built from."""

from __future__ import annotations

import numpy as np
import pytest

from query_api import bench
from query_api.capabilities import queries_of


@pytest.mark.parametrize("kind", sorted(bench.KIND_PATHS))
def test_each_kind_has_a_valid_collection_state_and_routes(kind: str) -> None:
    spec = bench._spec(f"b-{kind}", kind)
    state = bench._state(spec, kind, 5000, np.random.default_rng(1))
    spec.oracle().check_state(state)
    assert state.n == 5000
    answers = set(queries_of(spec)) | {"series", "attributes"}
    for _, route in bench.KIND_PATHS[kind]:
        assert route.split("?")[0].split("/")[0] in answers, route


def test_miss_paths_never_repeat_and_cycle_the_collections() -> None:
    specs = [(bench._spec("a", "olh"), "olh"), (bench._spec("b", "hh"), "hh")]
    paths = bench._miss_paths(specs, 20)
    assert len(set(paths)) == 20
    assert paths[0].startswith("/v1/collections/a/") and paths[1].startswith("/v1/collections/b/")


def test_zipf_and_the_table_cells() -> None:
    z = bench._zipf(10)
    assert abs(z.sum() - 1) < 1e-12 and (np.diff(z) < 0).all()
    assert bench._cell(0.0123, 8) == "    12.3"
    assert bench._cell(float("inf"), 8).strip().startswith(">")
    assert bench._ms(0.5).strip() == "500.0"


def test_paced_connections_go_round_robin_to_the_replicas() -> None:
    import asyncio

    seen: dict[int, int] = {}

    async def run() -> tuple[np.ndarray, int]:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            port = writer.get_extra_info("sockname")[1]
            while await reader.readuntil(b"\r\n\r\n"):
                seen[port] = seen.get(port, 0) + 1
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()

        servers = [await asyncio.start_server(serve, "127.0.0.1", 0) for _ in range(2)]
        ports = [s.sockets[0].getsockname()[1] for s in servers]
        try:
            lat, errors, _ = await bench._paced(ports, [f"/p{i}" for i in range(40)], 4,
                                                100.0, 0.4)
            return lat, errors
        finally:
            for s in servers:
                s.close()

    lat, errors = asyncio.run(run())
    assert errors == 0 and lat.size == 40
    assert sorted(seen.values()) == [20, 20]  # connections 0, 2 -> first; 1, 3 -> second
