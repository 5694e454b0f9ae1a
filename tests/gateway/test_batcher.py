"""gateway.batcher: requests re-batched into Kafka records and answered once, a bounded
queue (429), and a broker that does not acknowledge answered 503 at once until a probe
gets through.  A fake ``send`` stands in for the Kafka sink (the real one:
tests/gateway/test_exactly_once.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from gateway.batcher import Batcher, Overloaded, Unavailable
from gateway.parse import OCTETS, Catalogue, parse_body
from ldpcore.collection import CollectionSpec, encode_message

SPEC = CollectionSpec.from_dict({"id": "bt", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                 "domain": {"kind": "integers", "low": 0, "high": 7}})
CAT = Catalogue([SPEC])


def _body(n: int, seed: int) -> bytes:
    o = SPEC.oracle()
    return encode_message(SPEC, o.perturb(np.arange(n) % 8, rng=seed))


def _batcher(send: Any, **kw: Any) -> Batcher:
    opts = dict(linger=0.01, batch_bytes=1 << 16, queue_bytes=1 << 20, ack_timeout=2.0,
                retry_after=0.2)
    opts.update(kw)
    return Batcher(send, **opts)  # type: ignore[arg-type]


def test_requests_are_merged_into_one_record_and_each_answered_with_its_counts() -> None:
    sent: list[Any] = []

    async def send(records: Any, *args: Any) -> None:
        sent.append(list(records))

    async def run() -> list[Any]:
        b = _batcher(send)
        answers: list[Any] = []
        for i, n in enumerate((3, 5)):
            body = _body(n, i)
            b.submit(parse_body(OCTETS, body, CAT), len(body), answers.append)
        await b.drain()
        return answers

    answers = asyncio.run(run())
    assert sorted(answers) == [(1, 3), (1, 5)]
    assert len(sent) == 1 and len(sent[0]) == 1  # one Kafka record for both requests
    key = sent[0][0][0]
    assert key == b"bt"


def test_a_full_queue_is_overloaded_at_once() -> None:
    async def send(records: Any, *args: Any) -> None:
        await asyncio.sleep(0.05)

    async def run() -> None:
        b = _batcher(send, queue_bytes=100)
        body = _body(2, 0)
        b.submit(parse_body(OCTETS, body, CAT), 60, lambda a: None)
        with pytest.raises(Overloaded, match="limit 100"):
            b.submit(parse_body(OCTETS, body, CAT), 60, lambda a: None)
        await b.drain()

    asyncio.run(run())


def test_a_broker_that_fails_is_unavailable_until_a_probe_after_retry_after() -> None:
    ok = [False]

    async def send(records: Any, *args: Any) -> None:
        if not ok[0]:
            raise ConnectionError("broker away")

    async def run() -> None:
        b = _batcher(send)
        got: list[Any] = []
        body = _body(2, 0)
        b.submit(parse_body(OCTETS, body, CAT), len(body), got.append)
        await b.drain()
        assert isinstance(got[0], Unavailable) and not b.broker_up
        b.submit(parse_body(OCTETS, body, CAT), len(body), got.append)  # a probe, in flight
        with pytest.raises(Unavailable):  # refused at once while the probe waits
            b.submit(parse_body(OCTETS, body, CAT), len(body), got.append)
        await b.drain()
        assert isinstance(got[1], Unavailable)
        with pytest.raises(Unavailable):  # the next probe only after retry_after
            b.submit(parse_body(OCTETS, body, CAT), len(body), got.append)
        await asyncio.sleep(0.25)
        ok[0] = True
        b.submit(parse_body(OCTETS, body, CAT), len(body), got.append)  # the probe
        await b.drain()
        assert got[-1] == (1, 2) and b.broker_up

    asyncio.run(run())
