"""Queued reports with Privacy Pass tokens (Python SDK): the token of the report's
(collection, window) is obtained when it is queued (kept with it in the store) or when it is
sent, while its window is open; what can no longer be counted is dropped and counted
(``expired``).  A scripted gateway and an issuer blind-signing with the shared vectors' key
stand in for the real ones (the real ones: tests/sdks/test_sdk_tokens.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ldpcore.collection import CollectionSpec
from ldpstream.privacypass.tokens import (
    Token,
    b64url_decode,
    public_key_from_spki,
    verify_token,
)
from producer.sdk import Device, GatewayClient
from producer.store import FileStore, MemoryStore

from .standins import T0, WS, Gateway, Issuer, V

DEAD = "http://127.0.0.1:9"
SECRET = bytes(16)
SPEC = CollectionSpec.from_dict({"id": "qt", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                 "domain": {"kind": "categories", "labels": ["a", "b", "c"]},
                                 "window_seconds": WS, "memoization": "none",
                                 "reports_per_window": 3})


@pytest.fixture
def issuer() -> Iterator[Callable[[list[int]], Issuer]]:
    made: list[Issuer] = []

    def start(windows: list[int]) -> Issuer:
        made.append(Issuer(windows))
        return made[-1]

    yield start
    for i in made:
        i.close()


def client(url: str, issuer_url: str) -> GatewayClient:
    return GatewayClient(url, issuer_url=issuer_url, device_secret=SECRET, retries=0,
                         sleep=lambda s: None, clock=lambda: float(T0))


def test_a_report_queued_with_its_token_is_sent_with_it_after_a_restart(
        tmp_path: Path, issuer: Callable[[list[int]], Issuer], gateway: Gateway) -> None:
    iss = issuer([T0])
    path = tmp_path / "store.json"
    dev = Device(SPEC, store=FileStore(path), secret=SECRET)
    assert dev.enqueue("a", now=T0 + 5, tokens=client(DEAD, iss.url))
    iss.close()
    (entry,) = FileStore(path).outbox()  # the app restarts: read back from the file
    assert (entry["window"], entry["window_seconds"]) == (T0, WS)
    pk = public_key_from_spki(b64url_decode(V["token_key"]))
    assert verify_token(pk, Token.decode(b64url_decode(entry["token"])))
    out = client(gateway.url, DEAD).send_queued(FileStore(path), now=T0 + 60)
    assert out == {"sent": 1, "refused": 0, "pending": 0, "dropped": 0, "expired": 0,
                   "not_before": None}
    assert [h.get("authorization") for h, _ in gateway.seen] == [
        f'PrivateToken token="{entry["token"]}"']


def test_offline_when_queued_the_token_comes_when_sent_in_its_window_after_it_dropped(
        issuer: Callable[[list[int]], Issuer], gateway: Gateway) -> None:
    store = MemoryStore()
    dev = Device(SPEC, store=store, secret=SECRET)
    offline = client(DEAD, DEAD)
    assert dev.enqueue("a", now=T0 - 10, tokens=offline)  # the last window
    assert dev.enqueue("b", now=T0 + 10, tokens=offline)
    assert dev.enqueue("c", "json", now=T0 + 20, tokens=offline)
    assert all("token" not in e for e in store.outbox())
    # still offline: the report of the window that is over cannot be counted any more
    # (dropped without a request), the others are kept
    down = offline.send_queued(store, now=T0 + 30)
    assert (down["sent"], down["pending"], down["expired"]) == (0, 2, 1)
    iss = issuer([T0, T0 + WS])
    out = client(gateway.url, iss.url).send_queued(store, now=T0 + 30)
    assert out == {"sent": 2, "refused": 0, "pending": 0, "dropped": 0, "expired": 1,
                   "not_before": None}
    assert iss.asked == [T0, T0] and len(gateway.seen) == 2
    assert gateway.seen[0][0]["authorization"].startswith('PrivateToken token="')
    msg = json.loads(gateway.seen[1][1])
    assert len(msg["tokens"]) == 1 and len(msg["reports"]) == 1
    assert "authorization" not in gateway.seen[1][0]
    assert store.expired == 1


def test_key_expired_is_dropped_and_a_replay_of_its_own_token_was_delivered(
        issuer: Callable[[list[int]], Issuer], gateway: Gateway) -> None:
    iss = issuer([T0])
    store = MemoryStore()
    dev = Device(SPEC, store=store, secret=SECRET)
    online = client(DEAD, iss.url)
    assert all(dev.enqueue(v, now=T0, tokens=online) for v in "abc")
    iss.close()
    gateway.script = [(403, {}), (409, {}), (403, {})]
    reasons = iter(["token_key_expired", "token_replayed", "token_window"])
    gateway.reason = lambda: next(reasons, "r")
    c = client(gateway.url, DEAD)
    first = c.send_queued(store, now=T0)
    # token_window: the gateway's clock is not in the window yet: kept for the next call
    assert (first["sent"], first["refused"], first["expired"], first["pending"]) == (1, 0, 1, 1)
    again = c.send_queued(store, now=T0 + 1)
    assert (again["sent"], again["pending"]) == (1, 0)
    auths = [h["authorization"] for h, _ in gateway.seen]
    assert len(auths) == 4 and auths[2] == auths[3] and len(set(auths)) == 3
