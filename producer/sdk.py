"""Device-side SDK: perturb with a collection spec, keep the cadence, queue, publish.

A :class:`Device` follows its collection's longitudinal policy (see
:mod:`ldpcore.longitudinal` and ``docs/longitudinal.md``):

* **cadence**: :meth:`Device.message` / :meth:`Device.enqueue` make nothing when the
  device has already made ``spec.reports_per_window`` reports (default 1) for that
  collection in the current window (the windows the aggregator counts in);
* **memoization** per (collection fingerprint, true value):

  - ``"permanent"`` (the default; RAPPOR's permanent randomized response): the answer
    is *derived* from the device secret (HMAC-SHA256 over the collection fingerprint
    and the value, :class:`ldpcore.reference.PermanentWords`): the same every time,
    across restarts and in every SDK, with nothing stored but the secret.  Averaging
    repeats gains nothing, so one value costs ε however often it is sent; a *change*
    of value gives another answer (k values cost up to k·ε);
  - ``"two-level"`` (RAPPOR's PRR + IRR): the derived permanent answer at ε∞ is
    re-randomized afresh at ε₁ for every report;
  - ``"none"``: a fresh answer per report (for values reported once).

* **store** (:mod:`producer.store`): the device secret, the cadence and the outbox live
  in the platform's private store — by default a file under the user data directory
  (``platformdirs``), changed under a lock so that threads, several Device instances and
  processes agree.  ``store=MemoryStore()`` opts out: then every start is a new device
  with new permanent answers (averaging over restarts reveals the true value).
* **privacy budget**: with ``budget`` (the fleet's ``epsilon_per_day``, :mod:`ldpcore.budget`,
  ``GET /v1/fleet``) the device keeps a :class:`~ldpcore.budget.DailyLedger` of what it
  spent per UTC day over every collection, in its store (so every Device on the store
  shares it), or in one ``ledger`` object passed to several devices; each report is
  charged :func:`~ldpcore.budget.report_charge` (a repeated permanent answer costs
  nothing, a new value's answer ε, a two-level report ε_report until the value's ε∞) in
  the same store change as the cadence, and a report beyond the budget is not made
  (``None`` / ``False``).  The per-value report counts it needs are kept under a keyed
  hash of the value (HMAC with the device secret), not the value itself.
* **offline**: :meth:`Device.enqueue` makes the report and queues it durably in the
  store in one step (the cadence is spent when the report is made, never re-perturbed);
  :meth:`GatewayClient.send_queued` posts the queue and forgets a report only once the
  gateway acknowledged it.
* **randomness**: every fresh draw comes from the OS CSPRNG (``os.urandom``); a
  seeded generator can be injected for tests and simulations only
  (``test_only_rng``).  Every draw follows the reference order of
  docs/wire-format.md, so the three SDKs give byte-identical answers.
* **set-valued collections** (``ps``, ``psi``, ``setsize``): the value is a set of
  labels; in a phase of a partitioned protocol (``protocol: {name: svim | svsm, ...}``)
  the device takes part in the one phase
  :func:`ldpcore.setvalued.phases.device_phase` picks from its secret.

>>> from ldpcore.collection import CollectionSpec
>>> from producer.store import MemoryStore
>>> spec = CollectionSpec.from_dict({"id": "os", "oracle": {"mechanism": "grr", "epsilon": 1.0},
...     "domain": {"kind": "categories", "labels": ["linux", "mac", "win"]}})
>>> store = MemoryStore()
>>> dev = Device(spec, store=store)
>>> dev.report("mac") == Device(spec, store=store).report("mac")    # same secret, same answer
True
>>> first = dev.message("mac", now=7200.0)
>>> dev.message("mac", now=7201.0) is None          # same window: refused
True
>>> dev.message("mac", now=7200.0 + spec.window_seconds) == first   # next window
True
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ldpcore import Reports
from ldpcore.budget import DailyLedger, report_charge
from ldpcore.collection import CollectionSpec, window_start
from ldpcore.message import encode_message, frame, token_frame
from ldpcore.reference import (
    OsWords,
    PermanentWords,
    perturb_reference,
    rerandomize_reference,
)
from ldpstream.collections_file import read_collections_file, select_collection

from .store import DeviceStore, FileStore, MemoryStore, StoreError

__all__ = ["Device", "Client", "GatewayClient", "GatewayError", "load_spec", "fetch_spec",
           "DeviceStore", "FileStore", "MemoryStore", "StoreError"]


def load_spec(path: str | Path, collection: str | None = None) -> CollectionSpec:
    """Read one collection from a YAML/JSON file (a spec, a list, or {'collections': [...]})."""
    return select_collection(read_collections_file(path), collection, str(path))


def fetch_spec(api_url: str, collection: str, timeout: float = 10.0) -> CollectionSpec:
    """GET ``{api_url}/v1/collections/{id}`` from the query API and parse the spec
    (ldpcore refuses a spec outside its parameter ranges or with a wrong fingerprint)."""
    url = f"{api_url.rstrip('/')}/v1/collections/{collection}"
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - operator URL
        raw = json.loads(resp.read())
    return CollectionSpec.from_dict(raw.get("spec", raw) if isinstance(raw, dict) else raw)


class _GeneratorWords:
    """u32 words from a numpy Generator (``test_only_rng``)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng

    def next_u32(self) -> int:
        return int(self._rng.integers(0, 1 << 32, dtype=np.uint64))


class Device:
    """One device of one collection: maps values to the domain, perturbs, keeps the
    cadence, queues (see the module docstring).

    Parameters
    ----------
    spec : CollectionSpec
    store : DeviceStore, optional
        Where the secret, the cadence and the outbox live; default a :class:`FileStore`
        under the user data directory.  ``MemoryStore()`` keeps nothing (see above).
    clock : callable, optional
        Seconds since the epoch (default :func:`time.time`); decides the window.
    secret : bytes, optional
        The device secret (16 to 64 bytes) instead of the store's: an app that keeps it
        in its own keystore.
    test_only_rng : numpy Generator or int seed, optional
        Tests and simulations only: fresh draws (and a new secret) from this generator
        instead of the OS CSPRNG.
    memo_path : path, optional
        Shorthand for ``store=FileStore(memo_path)`` (SDK 0.1's name).
    budget : float, optional
        The fleet's per-device budget, ε per UTC day (``GET /v1/fleet``: ``budget.
        epsilon_per_day``); None: no ledger unless one is in the store or given.
    ledger : DailyLedger, optional
        Share one ledger between devices that do not share a store.
    """

    def __init__(self, spec: CollectionSpec, *, store: DeviceStore | None = None,
                 clock: Callable[[], float] | None = None, secret: bytes | None = None,
                 test_only_rng: np.random.Generator | int | None = None,
                 memo_path: str | Path | None = None, budget: float | None = None,
                 ledger: DailyLedger | None = None) -> None:
        self.spec = spec
        self.oracle = spec.oracle()
        self.two_level = spec.two_level()
        self.clock = clock or time.time
        if store is not None and memo_path is not None:
            raise ValueError("give store or memo_path, not both")
        self.store = (store if store is not None
                      else FileStore(memo_path) if memo_path is not None else FileStore())
        if secret is not None and not 16 <= len(secret) <= 64:
            raise ValueError(f"secret must be 16 to 64 bytes, got {len(secret)}")
        self._secret = bytes(secret) if secret is not None else None
        if test_only_rng is None:
            self._draws: Any = OsWords()
            self._make_secret: Callable[[], bytes] | None = None
        else:
            gen = (np.random.default_rng(test_only_rng) if isinstance(test_only_rng, int)
                   else test_only_rng)
            self._draws = _GeneratorWords(gen)
            self._make_secret = lambda: gen.bytes(32)
        self._answers: dict[int, Reports] = {}
        self._budget = None if budget is None else float(budget)
        self._ledger = ledger if ledger is not None else (
            DailyLedger(self._budget) if self._budget is not None else None)

    @property
    def secret(self) -> bytes:
        """The device secret (the store's, drawn on first use, unless one was given)."""
        if self._secret is None:
            self._secret = self.store.secret(self._make_secret)
        return self._secret

    # ---- values ------------------------------------------------------------------------------
    def _input(self, value: Any) -> tuple[Any, int]:
        """The oracle's input and the memo key of a raw value: a domain index; for a set the
        item indices (key -1 - their bitmask); for an attribute tuple its mixed-radix index."""
        if self.spec.set_valued:
            items = self.spec.index_sets([value]).to_lists()[0]
            return items, -1 - sum(1 << int(i) for i in items)
        idx = int(self.spec.domain.index([value])[0])
        return idx, idx

    def takes_part(self) -> bool:
        """False when a partitioned protocol puts this device in another phase of the group."""
        proto = self.spec.protocol
        if proto is None or proto.get("fractions") is None:
            return True
        from ldpcore.setvalued.phases import PHASES, device_phase

        mine = device_phase(self.secret, str(proto["group"]), proto["fractions"])
        return bool(PHASES[proto["name"]][mine] == proto["phase"])

    # ---- answers -----------------------------------------------------------------------------
    def permanent(self, value: Any) -> Reports:
        """The permanent answer of a value: derived from the secret, the collection's
        fingerprint and the value (docs/wire-format.md, "Permanent answers")."""
        inp, key = self._input(value)
        rep = self._answers.get(key)
        if rep is None:
            words = PermanentWords(self.secret, self.spec.fingerprint, key)
            rep = self._answers[key] = perturb_reference(self.oracle, [inp], words)
        return rep

    def report(self, value: Any) -> Reports:
        """The one-report batch for a label or number of the domain, per the memo policy.

        It does not count toward the cadence (use :meth:`message` or :meth:`enqueue`).
        For a set-valued collection ``value`` is a set of labels.
        """
        if self.spec.memoization == "none":
            inp, _ = self._input(value)
            return perturb_reference(self.oracle, [inp], self._draws)
        rep = self.permanent(value)
        if self.two_level is not None:
            return rerandomize_reference(self.two_level, rep, self._draws)
        return rep

    def current_window(self, now: float | None = None) -> int:
        """Start (epoch s) of the collection window holding ``now`` (default: the clock)."""
        t = self.clock() if now is None else now
        return window_start(int(t * 1000), self.spec.window_seconds)

    def _cadence(self, doc: dict[str, Any]) -> dict[str, Any]:
        entry = doc["collections"].get(self.spec.fingerprint)
        if not isinstance(entry, dict):
            entry = {"collection": self.spec.id, "window": None, "sent": 0}
        return entry

    def _allowed(self, entry: dict[str, Any], window: int) -> bool:
        return bool(entry.get("window") != window
                    or int(entry.get("sent", 0)) < self.spec.reports_per_window)

    def can_report(self, now: float | None = None) -> bool:
        """True unless the cadence is used up in the current window."""
        window = self.current_window(now)
        return self._allowed(self._cadence(self.store.snapshot()), window)

    @property
    def window(self) -> int | None:
        """Start (epoch s) of the window of the last report made."""
        w = self._cadence(self.store.snapshot()).get("window")
        return None if w is None else int(w)

    @property
    def sent_in_window(self) -> int:
        """Reports made in :attr:`window`."""
        return int(self._cadence(self.store.snapshot()).get("sent", 0))

    # ---- the privacy budget -------------------------------------------------------------------
    def _value_tag(self, key: int) -> str:
        """The ledger's name of a value: a keyed hash (the store never names a value)."""
        msg = f"ldpstream/ledger/v1\x00{self.spec.fingerprint}\x00{key}".encode()
        return hmac.new(self.secret, msg, hashlib.sha256).hexdigest()[:32]

    def _ledger_in(self, doc: dict[str, Any]) -> DailyLedger | None:
        """The device's ledger, with what every Device of the store spent so far."""
        raw = doc.get("ledger")
        stored = None
        if raw is not None:
            try:
                stored = DailyLedger.from_dict(raw)
            except (TypeError, ValueError, AttributeError) as exc:
                raise StoreError(f"the store has a bad ledger: {exc}") from None
        if self._ledger is None and stored is not None:
            self._ledger = stored
        elif self._ledger is not None and stored is not None:
            self._ledger.days = stored.days
        if self._ledger is not None and self._budget is not None:
            self._ledger.budget = self._budget  # the fleet's current policy wins
        return self._ledger

    @property
    def ledger(self) -> DailyLedger | None:
        """What this device spent per UTC day (None: no budget applies)."""
        return self.store.transact(self._ledger_in)

    def _cost(self, doc: dict[str, Any], key: int) -> float:
        counts = self._cadence(doc).get("reports") or {}
        n = counts.get(self._value_tag(key)) if self.spec.memoization != "none" else None
        return report_charge(self.spec, fresh=n is None, value_reports=int(n or 0))

    def cost(self, value: Any) -> float:
        """The ε reporting ``value`` now spends (:func:`ldpcore.budget.report_charge`)."""
        key = self._input(value)[1]
        return self.store.transact(lambda doc: self._cost(doc, key))

    def _spend(self, window: int, then: Callable[[dict[str, Any]], None] | None = None,
               key: int | None = None, t: float | None = None) -> bool:
        """Take one report of ``window``'s cadence in the store, and its charge in the
        ledger (atomically with ``then``)."""

        def take(doc: dict[str, Any]) -> bool:
            entry = self._cadence(doc)
            if not self._allowed(entry, window):
                return False
            ledger = self._ledger_in(doc) if key is not None else None
            counts = dict(entry.get("reports") or {})
            if ledger is not None:
                assert key is not None and t is not None
                cost = self._cost(doc, key)
                if not ledger.allows(cost, t):
                    return False  # the day's privacy budget would be exceeded
                ledger.charge(self.spec.id, cost, t)
                doc["ledger"] = ledger.to_dict()
                if self.spec.memoization != "none":
                    tag = self._value_tag(key)
                    counts[tag] = int(counts.get(tag, 0)) + 1
            sent = int(entry.get("sent", 0)) + 1 if entry.get("window") == window else 1
            out = {**entry, "collection": self.spec.id, "window": window, "sent": sent}
            if counts:
                out["reports"] = counts
            doc["collections"][self.spec.fingerprint] = out
            if then is not None:
                then(doc)
            return True

        return self.store.transact(take)

    def _make(self, value: Any, fmt: str, now: float | None
              ) -> tuple[int, bytes, int, float] | None:
        t = self.clock() if now is None else now
        window = self.current_window(t)
        if not self.can_report(t) or not self.takes_part():
            return None
        key = self._input(value)[1]
        return window, encode_message(self.spec, self.report(value), fmt), key, t

    def message(self, value: Any, fmt: str = "binary", *, now: float | None = None
                ) -> bytes | None:
        """The message of one report (the cadence spent), or ``None`` when the device
        already made ``spec.reports_per_window`` reports to this collection in the current
        window, the day's privacy budget would be exceeded (or the device takes part in
        another phase).  Not queued: the caller sends it (or
        loses it) — see :meth:`enqueue`.  Never contains the raw value.
        """
        made = self._make(value, fmt, now)
        if made is None or not self._spend(made[0], key=made[2], t=made[3]):
            return None
        return made[1]

    def enqueue(self, value: Any, fmt: str = "binary", *, now: float | None = None,
                tokens: GatewayClient | None = None) -> bool:
        """Make one report and queue it in the store, in one step; ``False`` when the
        cadence is used up, the budget would be exceeded (or the device is in another
        phase).  The queue is posted by
        :meth:`GatewayClient.send_queued`; the report is kept until the gateway took it.

        ``tokens``: a :class:`GatewayClient` with an issuer; the report's Privacy Pass token
        (for its collection and window) is obtained now, if the issuer can be reached, and
        kept with the queued report (:meth:`GatewayClient.attach_token`); else
        :meth:`GatewayClient.send_queued` obtains it, while the window is open."""
        made = self._make(value, fmt, now)
        if made is None:
            return False
        window, body, key, t = made
        entry = {"key": str(uuid.uuid4()), "collection": self.spec.id,
                 "fingerprint": self.spec.fingerprint,
                 "type": "application/json" if fmt == "json" else "application/octet-stream",
                 "body": body.hex(), "window": window,
                 "window_seconds": self.spec.window_seconds}
        limit = self.store.queue_limit
        if not self._spend(window, lambda doc: DeviceStore.push(doc, entry, limit), key, t):
            return False
        if tokens is not None:
            tokens.attach_token(self.store, str(entry["key"]), now=t, quiet=True)
        return True


class Client:
    """Publishes report batches with kafka-python: idempotent producer, acks=all.

    A context manager; ``close`` flushes.  ``fmt`` is ``"binary"`` (compact columnar
    batches) or ``"json"`` (interop).
    """

    def __init__(self, bootstrap: str, topic: str = "ldp-reports", fmt: str = "binary",
                 **producer_config: Any) -> None:
        from kafka import KafkaProducer

        if fmt not in ("binary", "json"):
            raise ValueError(f"fmt must be 'binary' or 'json', got {fmt!r}")
        self.topic, self.fmt = topic, fmt
        config: dict[str, Any] = {"acks": "all", "enable_idempotence": True,
                                  "linger_ms": 10, "batch_size": 1 << 20,
                                  "max_request_size": 16 << 20, **producer_config}
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, **config)

    def send(self, spec: CollectionSpec, reports: Reports, partition: int | None = None) -> Any:
        """Publish one batch (one Kafka message, key = collection id); returns the future.

        ``partition`` overrides the key hash (to spread one collection in tests/benchmarks).
        """
        return self.producer.send(self.topic, key=spec.id.encode(), partition=partition,
                                  value=encode_message(spec, reports, self.fmt))

    def send_raw(self, key: bytes | None, value: bytes, partition: int | None = None) -> Any:
        """Publish arbitrary bytes (for tests of the dead-letter path)."""
        return self.producer.send(self.topic, key=key, value=value, partition=partition)

    def flush(self, timeout: float | None = 60.0) -> None:
        self.producer.flush(timeout)

    def close(self) -> None:
        self.producer.flush(60)
        self.producer.close(10)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class GatewayError(RuntimeError):
    """The gateway refused a request (a 4xx other than 429), or asked to come back later
    than the client may wait: ``status``, ``reason`` (see docs/gateway.md), ``index`` of
    the message at fault, ``retry_after`` (seconds, for 429/503)."""

    def __init__(self, status: int, answer: dict[str, Any],
                 retry_after: float | None = None) -> None:
        super().__init__(f"{status} {answer.get('reason')}: {answer.get('detail')}")
        self.status, self.reason = status, answer.get("reason")
        self.index = answer.get("index")
        self.retry_after = retry_after


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds (delta seconds or an HTTP date), or ``None``."""
    if not value:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


class GatewayClient:
    """Posts report batches to the HTTP ingestion gateway (``ldpstream gateway``) instead of
    Kafka: for devices without Kafka credentials.  Same ``send``/``flush``/``close`` as
    :class:`Client`.

    One keep-alive connection; each ``send`` is one ``POST /v1/reports`` of one message
    (``application/octet-stream``, or ``application/json`` with ``fmt="json"``), answered
    only once the broker holds it.  Every request carries an ``Idempotency-Key`` (random,
    the same on each retry of that request; a queued report keeps its own across
    restarts), so the gateway can count a retried request once.  429 and 503 are retried
    after exactly the ``Retry-After`` the gateway states when that is at most
    ``max_wait`` seconds, else :class:`GatewayError` (with ``retry_after``) at once —
    never earlier than asked; lost connections are retried with exponential backoff (at
    most ``retries`` times); another 4xx raises :class:`GatewayError` at once.

    **Privacy Pass** (docs/privacy-pass.md): with ``issuer_url`` every report goes with
    one token of its (collection, window), obtained from ``ldpstream issuer`` and cached
    (:class:`ldpstream.privacypass.client.TokenWallet`): a one-report binary message
    carries it in ``Authorization: PrivateToken`` (the device key then goes in
    ``X-LDP-Key``), a JSON message in ``"tokens"``, a binary message of several reports
    as token frames.  At a window's edge, a token refused as of the wrong window
    (``token_window``, ``token_key_expired``: the device's clock and the gateway's
    disagree) is replaced by one of the neighbouring window, once.  Queued reports
    (:meth:`send_queued`) carry the token of the window they were made in: kept with the
    report when it was queued (:meth:`Device.enqueue` with ``tokens=``), else obtained when
    it is sent; a report whose window is over can no longer be counted and is dropped
    (counted in ``expired``).

    Parameters
    ----------
    url : str
        Base URL of the gateway, e.g. ``http://127.0.0.1:8080``.
    key : str, optional
        Device key of the fleet (``Authorization: Bearer``) when the gateway needs one.
    max_wait : float
        Longest ``Retry-After`` (seconds) the client sleeps through.
    issuer_url : str, optional
        Base URL of the token issuer: reports then carry Privacy Pass tokens.
    device_secret : bytes, optional
        The device's persistent secret (e.g. :attr:`Device.secret`); the issuer sees only
        ``HMAC(secret, …)`` and counts the quota against it.  Default: a fresh one per
        client (so a restarted app would be a new device: pass a persisted one).
    issuer_key : str, optional
        Fleet key for the issuer (default: ``key``).
    """

    def __init__(self, url: str, fmt: str = "binary", key: str | None = None,
                 timeout: float = 30.0, retries: int = 5, max_wait: float = 60.0,
                 sleep: Callable[[float], None] = time.sleep, *,
                 issuer_url: str | None = None, device_secret: bytes | None = None,
                 issuer_key: str | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        from urllib.parse import urlsplit

        if fmt not in ("binary", "json"):
            raise ValueError(f"fmt must be 'binary' or 'json', got {fmt!r}")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http(s)://host[:port], got {url!r}")
        self.fmt, self.key, self.timeout, self.retries = fmt, key, timeout, retries
        self.max_wait, self._sleep = max_wait, sleep
        self._scheme, self._host = parts.scheme, parts.hostname
        self._port = parts.port
        self._path = parts.path.rstrip("/") + "/v1/reports"
        self._conn: Any = None
        self.accepted_reports = 0
        self.clock = clock or time.time
        self.wallet: Any = None
        if issuer_url is not None:
            from ldpstream.privacypass.client import IssuerClient, TokenWallet, device_credential

            secret = device_secret if device_secret is not None else os.urandom(16)
            self.wallet = TokenWallet(IssuerClient(issuer_url, device_credential(secret),
                                                   fleet_key=issuer_key or key,
                                                   timeout=timeout))

    def _connection(self) -> Any:
        import http.client

        if self._conn is None:
            cls = (http.client.HTTPSConnection if self._scheme == "https"
                   else http.client.HTTPConnection)
            self._conn = cls(self._host, self._port, timeout=self.timeout)
        return self._conn

    def headers(self, content_type: str, idempotency_key: str, token: bytes | None = None
                ) -> dict[str, str]:
        """The headers of one request (the one place they are built): with a Privacy Pass
        ``token`` it goes in ``Authorization: PrivateToken`` and the device key in
        ``X-LDP-Key``."""
        out = {"Content-Type": content_type, "Idempotency-Key": idempotency_key}
        if token is not None:
            from ldpstream.privacypass.tokens import authorization_header

            out["Authorization"] = authorization_header(token)
            if self.key is not None:
                out["X-LDP-Key"] = self.key
        elif self.key is not None:
            out["Authorization"] = f"Bearer {self.key}"
        return out

    def post(self, body: bytes, content_type: str, token: bytes | None = None, *,
             idempotency_key: str | None = None) -> dict[str, Any]:
        """POST one body; the 202 answer (``accepted_messages``, ``accepted_reports``).
        ``token``: a Privacy Pass token in ``Authorization: PrivateToken``."""
        headers = self.headers(content_type, idempotency_key or str(uuid.uuid4()), token)
        for attempt in range(self.retries + 1):
            try:
                conn = self._connection()
                conn.request("POST", self._path, body=body, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
            except OSError:
                self.close_connection()
                if attempt == self.retries:
                    raise
                self._sleep(min(2.0 ** attempt * 0.1, 5.0))
                continue
            try:
                answer = json.loads(raw) if raw else {}
            except ValueError:
                answer = {"detail": raw[:200].decode("utf-8", "replace")}
            if not isinstance(answer, dict):
                answer = {}
            if resp.status == 202:
                self.accepted_reports += int(answer.get("accepted_reports", 0))
                return dict(answer)
            if resp.status in (429, 503):
                wait = retry_after_seconds(resp.getheader("Retry-After"))
                if wait is None:
                    wait = min(2.0 ** attempt * 0.1, 5.0)
                if attempt < self.retries and wait <= self.max_wait:
                    self._sleep(wait)
                    continue
                raise GatewayError(resp.status, answer, retry_after=wait)
            raise GatewayError(resp.status, answer)
        raise AssertionError("unreachable")  # pragma: no cover

    def send(self, spec: CollectionSpec, reports: Reports, partition: int | None = None
             ) -> dict[str, Any]:
        """Post one batch as one message (``partition`` is ignored: the gateway decides)."""
        if self.wallet is not None:
            return self._send_with_tokens(spec, reports)
        ctype = "application/json" if self.fmt == "json" else "application/octet-stream"
        return self.post(encode_message(spec, reports, self.fmt), ctype)

    def _send_with_tokens(self, spec: CollectionSpec, reports: Reports) -> dict[str, Any]:
        from ldpstream.privacypass.scheme import window_of

        window = window_of(self.clock(), spec.window_seconds)
        for attempt in (0, 1):
            tokens = self.wallet.take(spec, len(reports), window)
            try:
                if self.fmt == "json":
                    obj = json.loads(encode_message(spec, reports, "json"))
                    from ldpstream.privacypass.tokens import b64url

                    obj["tokens"] = [b64url(t) for t in tokens]
                    return self.post(json.dumps(obj, separators=(",", ":")).encode(),
                                     "application/json")
                msg = encode_message(spec, reports)
                if len(tokens) == 1:
                    return self.post(msg, "application/octet-stream", token=tokens[0])
                return self.post(token_frame([(tokens, msg)]), "application/x-ldp-token-frames")
            except GatewayError as exc:
                # the gateway's clock puts the report in the neighbouring window
                if attempt or exc.reason not in ("token_window", "token_key_expired"):
                    raise
                window += spec.window_seconds * (1 if exc.reason == "token_key_expired" else -1)
        raise AssertionError("unreachable")  # pragma: no cover

    def send_many(self, messages: list[bytes]) -> dict[str, Any]:
        """Post several binary messages in one request (``application/x-ldp-frames``)."""
        return self.post(frame(messages), "application/x-ldp-frames")

    def attach_token(self, store: DeviceStore, key: str, *, now: float | None = None,
                     quiet: bool = False) -> bool:
        """Obtain the Privacy Pass token of the queued report ``key`` (for its collection
        and the window it was made in) and keep it with the report in the store.  Tokens
        cannot be linked to the device that obtained them, so keeping one is no more
        revealing than the report itself.  ``True`` when the report now has a token;
        ``False`` when there is no issuer, no such report, or its window is over.  Issuer
        errors (unreachable, refusals) are raised, or with ``quiet`` answered ``False``."""
        if self.wallet is None:
            return False
        entry = next((e for e in store.snapshot()["outbox"] if e.get("key") == key), None)
        if entry is None:
            return False
        if entry.get("token"):
            return True
        t = self.clock() if now is None else now
        if _window_over(entry, t):
            return False
        try:
            token = self.wallet.take_for(str(entry["collection"]), int(entry["window"]))
        except Exception as exc:
            if quiet and _issuer_failure(exc):
                return False
            raise
        from ldpstream.privacypass.tokens import b64url

        def put(doc: dict[str, Any]) -> bool:
            for e in doc["outbox"]:
                if e.get("key") == key and not e.get("token"):
                    e["token"] = b64url(token)
                    return True
            return False

        return store.transact(put)

    def _post_queued(self, entry: dict[str, Any]) -> None:
        body, ctype = bytes.fromhex(entry["body"]), str(entry["type"])
        token = entry.get("token")
        if token and ctype == "application/json":
            obj = json.loads(body)
            obj["tokens"] = [token]
            body = json.dumps(obj, separators=(",", ":")).encode()
            token = None
        from ldpstream.privacypass.tokens import b64url_decode

        self.post(body, ctype, b64url_decode(token) if token else None,
                  idempotency_key=entry["key"])

    def send_queued(self, store: DeviceStore, *, now: float | None = None) -> dict[str, Any]:
        """Post the reports :meth:`Device.enqueue` queued in ``store``, oldest first, one
        request each with the report's own ``Idempotency-Key``; a report leaves the queue
        only once the gateway accepted it (202) or refused it for good (a 4xx: counted in
        ``refused``).  Stops at the first network failure or 429/503 (a ``Retry-After``
        longer than ``max_wait`` is kept in the store: no request before it passes).

        With an issuer (``issuer_url``), or for a report queued with its token, each report
        goes with the token of its (collection, window), obtained now if it has none (the
        issuer unreachable: stop, as for the gateway).  The gateway counts a token only
        while its window is open, so a report whose window is over (by this clock, or as
        the gateway says: ``token_key_expired``, or the issuer for a token it can no longer
        give) is dropped without being sent and counted in ``expired``.

        Returns ``{"sent", "refused", "pending", "dropped", "not_before"}`` and, with an
        issuer, ``"expired"`` (the store's counter, also :attr:`DeviceStore.expired`).
        """
        t = time.time() if now is None else now
        doc = store.snapshot()
        sent = refused = 0
        not_before = doc.get("not_before")
        if not_before is None or t >= float(not_before):
            if not_before is not None:
                _set_not_before(store, None)
            for entry in doc["outbox"]:
                tokened = self.wallet is not None or bool(entry.get("token"))
                if tokened and _window_over(entry, t):
                    _forget(store, entry["key"], counter="expired")
                    continue
                if self.wallet is not None and not entry.get("token"):
                    try:
                        self.attach_token(store, entry["key"], now=t)
                    except Exception as exc:
                        if not _issuer_failure(exc):
                            raise
                        reason = getattr(exc, "reason", None)
                        if reason in ("window", "no_key", "token_key"):
                            _forget(store, entry["key"], counter="expired")
                            continue
                        if 400 <= getattr(exc, "status", 0) < 500:
                            refused += 1  # the issuer will not give this report a token
                            _forget(store, entry["key"], counter="refused")
                            continue
                        break  # unreachable: try again later
                    fresh = next((e for e in store.snapshot()["outbox"]
                                  if e.get("key") == entry["key"]), None)
                    if fresh is None:
                        continue  # another sender posted it meanwhile
                    entry = fresh
                try:
                    self._post_queued(entry)
                except GatewayError as exc:
                    if exc.status in (429, 503):
                        if exc.retry_after is not None:
                            _set_not_before(store, t + exc.retry_after)
                        break
                    if exc.reason == "token_window":
                        break  # the gateway's clock is not in its window yet
                    if exc.reason == "token_key_expired":
                        _forget(store, entry["key"], counter="expired")
                        continue
                    if exc.reason != "token_replayed":
                        refused += 1
                        _forget(store, entry["key"], counter="refused")
                        continue
                    # its own token, redeemed before: an earlier attempt was accepted and
                    # its answer lost
                except OSError:
                    break
                sent += 1
                _forget(store, entry["key"])
        final = store.snapshot()
        out = {"sent": sent, "refused": refused, "pending": len(final["outbox"]),
               "dropped": int(final["dropped"]), "not_before": final.get("not_before")}
        if self.wallet is not None:
            out["expired"] = int(final.get("expired", 0))
        return out

    def flush(self, timeout: float | None = 60.0) -> None:
        """Nothing to do: every ``send`` returned once the broker held its reports."""

    def close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        self.close_connection()

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _set_not_before(store: DeviceStore, until: float | None) -> None:
    def put(doc: dict[str, Any]) -> None:
        doc["not_before"] = until

    store.transact(put)


def _forget(store: DeviceStore, key: str, counter: str | None = None) -> None:
    """Remove the queued report ``key`` (another sender may have removed it already) and
    count it in ``counter`` (``refused``, ``expired``) if it was still there."""

    def drop(doc: dict[str, Any]) -> None:
        before = len(doc["outbox"])
        doc["outbox"] = [e for e in doc["outbox"] if e.get("key") != key]
        if counter is not None and len(doc["outbox"]) < before:
            doc[counter] = int(doc.get(counter, 0)) + 1

    store.transact(drop)


def _window_over(entry: dict[str, Any], now: float) -> bool:
    """True when the window a queued report was made in is over (its token can no longer
    be redeemed); entries of SDKs that did not record the window's length: unknown."""
    w, ws = entry.get("window"), entry.get("window_seconds")
    return isinstance(w, int) and isinstance(ws, int) and now >= w + ws


def _issuer_failure(exc: BaseException) -> bool:
    """An error of the issuer round trip: unreachable, a refusal, a bad answer."""
    import httpx

    from ldpstream.privacypass.client import IssuanceRefused
    from ldpstream.privacypass.tokens import TokenError

    return isinstance(exc, (OSError, httpx.HTTPError, IssuanceRefused, TokenError))
