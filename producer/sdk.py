"""Device-side SDK: perturb with a collection spec, memoize, keep the cadence, publish to Kafka.

A :class:`Device` follows its collection's longitudinal policy (see
:mod:`ldpcore.longitudinal` and ``docs/longitudinal.md``):

* **cadence**: :meth:`Device.message` returns ``None`` when the device has already
  sent ``spec.reports_per_window`` reports (default 1) to that collection in the
  current window (the same tumbling windows the aggregator counts in);
* **memoization** per (collection fingerprint, true value):

  - ``"permanent"`` (the default; RAPPOR's permanent randomized response): the
    randomized answer is drawn once and sent verbatim every time.  Averaging
    repeats gains nothing, so one value costs ε however often it is sent; but the
    stable answer can link reports of one device, and a *change* of value draws a
    new answer (k values cost up to k·ε and hint at the change);
  - ``"two-level"`` (RAPPOR's PRR + IRR): a permanent answer at ε∞ is memoized and
    every report re-randomizes it afresh at ε₁: one report costs less than ε∞,
    any number at most ε∞ per value, and reports of one device differ;
  - ``"none"``: a fresh answer per report (each report costs ε: only for values
    reported once, e.g. one-off events).

* **persistence**: with ``memo_path`` the memo and the cadence bookkeeping are
  written to that file after every change (atomically, mode 0600) and reloaded by
  the next :class:`Device` built with the same path, so a restarted app neither
  draws a new answer nor reports twice in a window.  The file holds the value
  indices the answers belong to: keep it in app-private storage.  Several
  collections may share one file (entries are keyed by fingerprint).
* **privacy budget**: with ``budget`` (the fleet's ``epsilon_per_day``, :mod:`ldpcore.budget`,
  ``GET /v1/fleet``) the device keeps a :class:`~ldpcore.budget.DailyLedger` of what it
  spent per UTC day, over every collection (persisted in the memo file beside the
  memos, or shared by passing one ``ledger`` to several devices), charges each report
  :func:`~ldpcore.budget.report_charge` (a repeated memoized answer costs nothing, a new
  value's draw costs ε, a two-level report ε_report until the value's ε∞) and
  :meth:`Device.message` returns ``None`` for a report that would exceed the budget;
* **randomness**: OS entropy (a generator freshly seeded from the OS for every
  draw) unless a ``rng`` is given (tests and simulations only).
* **set-valued collections** (mechanisms ``ps``, ``psi``, ``setsize``): the value is
  a set of labels (any iterable); it is memoized per set like a single value.  In
  a phase of a partitioned protocol (``protocol: {name: svim | svsm, ...}``) the
  device takes part in the one phase :func:`ldpcore.setvalued.phases.device_phase`
  picks from its ``secret`` (default: drawn once and kept in the memo file, else
  per :class:`Device`); :meth:`Device.message` returns ``None`` for the others, so
  a device spends ``protocol.epsilon_total`` once per group.

>>> from ldpcore.collection import CollectionSpec
>>> spec = CollectionSpec.from_dict({"id": "os", "oracle": {"mechanism": "grr", "epsilon": 1.0},
...     "domain": {"kind": "categories", "labels": ["linux", "mac", "win"]}})
>>> dev = Device(spec)
>>> a, b = dev.report("mac"), dev.report("mac")
>>> a == b
True
>>> first = dev.message("mac", now=7200.0)
>>> dev.message("mac", now=7201.0) is None          # same window: refused
True
>>> dev.message("mac", now=7200.0 + spec.window_seconds) == first   # next window
True
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ldpcore import Reports, wire
from ldpcore.budget import DailyLedger, report_charge
from ldpcore.collection import CollectionSpec, encode_message, window_start
from ldpstream.collections_file import read_collections_file, select_collection

__all__ = ["Device", "Client", "GatewayClient", "GatewayError", "load_spec", "fetch_spec"]


def load_spec(path: str | Path, collection: str | None = None) -> CollectionSpec:
    """Read one collection from a YAML/JSON file (a spec, a list, or {'collections': [...]})."""
    return select_collection(read_collections_file(path), collection, str(path))


def fetch_spec(api_url: str, collection: str, timeout: float = 10.0) -> CollectionSpec:
    """GET ``{api_url}/v1/collections/{id}`` from the query API and parse the spec."""
    url = f"{api_url.rstrip('/')}/v1/collections/{collection}"
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - operator URL
        raw = json.loads(resp.read())
    return CollectionSpec.from_dict(raw.get("spec", raw) if isinstance(raw, dict) else raw)


MEMO_FORMAT = "ldpstream-device-memo"
MEMO_VERSION = 1


class Device:
    """One device of one collection: maps values to the domain, perturbs, memoizes, keeps
    the cadence (see the module docstring).

    Parameters
    ----------
    spec : CollectionSpec
    rng : numpy Generator or int seed, optional
        Only for tests and simulations; by default every draw uses OS entropy.
    memo_path : path, optional
        Persist the memo and the cadence here (reloaded if the file exists).
    clock : callable, optional
        Seconds since the epoch (default :func:`time.time`); decides the window and the day.
    budget : float, optional
        The fleet's per-device budget, ε per UTC day (``GET /v1/fleet``: ``budget.
        epsilon_per_day``); None: no ledger unless one is in the memo file or given.
    ledger : DailyLedger, optional
        Share one ledger between the devices of several collections (with a memo file
        they share it through the file).
    """

    def __init__(self, spec: CollectionSpec, rng: np.random.Generator | int | None = None, *,
                 memo_path: str | Path | None = None,
                 clock: Callable[[], float] | None = None, secret: bytes | None = None,
                 budget: float | None = None, ledger: DailyLedger | None = None) -> None:
        self.spec = spec
        self.oracle = spec.oracle()
        self.two_level = spec.two_level()
        self.rng = np.random.default_rng(rng) if isinstance(rng, int) else rng
        self.clock = clock or time.time
        self.memo_path = Path(memo_path) if memo_path is not None else None
        self.memo: dict[tuple[str, int], Reports] = {}
        self.window: int | None = None
        """Start (epoch s) of the window of the last message sent."""
        self.sent_in_window = 0
        self.secret = secret
        self.value_reports: dict[tuple[str, int], int] = {}
        """Reports sent per memoized value (two-level: what the next one costs)."""
        self.ledger = ledger if ledger is not None else (
            DailyLedger(float(budget)) if budget is not None else None)
        if self.memo_path is not None and self.memo_path.exists():
            self.load(self.memo_path)
        if budget is not None and self.ledger is not None:
            self.ledger.budget = float(budget)  # the fleet's current policy wins

    # ---- set-valued collections ----------------------------------------------------------
    def _set_key(self, value: Any) -> int:
        """A memo key of a set of items: -1 - (bitmask of its indices) (never a value index)."""
        batch = self.spec.index_sets([value])
        return -1 - sum(1 << int(i) for i in batch.items)

    def takes_part(self) -> bool:
        """False when a partitioned protocol puts this device in another phase of the group."""
        proto = self.spec.protocol
        if proto is None or proto.get("fractions") is None:
            return True
        from ldpcore.setvalued.phases import PHASES, device_phase

        if self.secret is None:
            self.secret = os.urandom(16)
            self._save()
        mine = device_phase(self.secret, str(proto["group"]), proto["fractions"])
        return bool(PHASES[proto["name"]][mine] == proto["phase"])

    # ---- answers -------------------------------------------------------------------------
    def _value_key(self, value: Any) -> tuple[str, int]:
        """The memo key of ``value``: (fingerprint, index or set key)."""
        idx = (self._set_key(value) if self.spec.set_valued
               else int(self.spec.domain.index([value])[0]))
        return self.spec.fingerprint, idx

    def cost(self, value: Any) -> float:
        """The ε reporting ``value`` now spends (:func:`ldpcore.budget.report_charge`)."""
        key = self._value_key(value)
        return report_charge(self.spec, fresh=key not in self.memo,
                             value_reports=self.value_reports.get(key, 0))

    def report(self, value: Any) -> Reports:
        """The one-report batch for a label or number of the domain, per the memo policy.

        It does not count toward the cadence (use :meth:`message` to send).  For a
        set-valued collection ``value`` is a set of labels.
        """
        if self.spec.set_valued:
            idx = self._set_key(value)
            sets: Any = self.spec.index_sets([value])

            def fresh() -> Reports:
                out: Reports = self.oracle.perturb_sets(  # type: ignore[attr-defined]
                    sets, rng=self.rng)
                return out
        else:
            idx = int(self.spec.domain.index([value])[0])

            def fresh() -> Reports:
                return self.oracle.perturb([idx], rng=self.rng)
        policy = self.spec.memoization
        if policy == "none":
            return fresh()
        key = (self.spec.fingerprint, idx)
        rep = self.memo.get(key)
        if rep is None:
            rep = self.memo[key] = fresh()
            self._save()
        if self.two_level is not None:
            return self.two_level.rerandomize(rep, rng=self.rng)
        return rep

    def current_window(self, now: float | None = None) -> int:
        """Start (epoch s) of the collection window holding ``now`` (default: the clock)."""
        t = self.clock() if now is None else now
        return window_start(int(t * 1000), self.spec.window_seconds)

    def can_report(self, now: float | None = None) -> bool:
        """True unless the cadence is used up in the current window."""
        return (self.window != self.current_window(now)
                or self.sent_in_window < self.spec.reports_per_window)

    def message(self, value: Any, fmt: str = "binary", *, now: float | None = None
                ) -> bytes | None:
        """The Kafka message value for one report, or ``None`` when the device already sent
        ``spec.reports_per_window`` reports to this collection in the current window.

        Never contains the raw value.
        """
        t = self.clock() if now is None else now
        window = self.current_window(t)
        if window == self.window and self.sent_in_window >= self.spec.reports_per_window:
            return None
        if not self.takes_part():
            return None
        ledger = self._current_ledger()
        cost = self.cost(value) if ledger is not None else 0.0
        if ledger is not None and not ledger.allows(cost, t):
            return None  # the day's privacy budget would be exceeded
        key = self._value_key(value)
        msg = encode_message(self.spec, self.report(value), fmt)
        if ledger is not None:
            ledger.charge(self.spec.id, cost, t)
        if self.spec.memoization != "none":
            self.value_reports[key] = self.value_reports.get(key, 0) + 1
        self.sent_in_window = self.sent_in_window + 1 if window == self.window else 1
        self.window = window
        self._save()
        return msg

    def _current_ledger(self) -> DailyLedger | None:
        """The ledger, with what the other devices of the memo file spent since."""
        if self.ledger is not None and self.memo_path is not None and self.memo_path.exists():
            raw = _read_memo_file(self.memo_path).get("ledger")
            if isinstance(raw, dict):
                self.ledger.days = DailyLedger.from_dict(raw).days
        return self.ledger

    # ---- persistence ---------------------------------------------------------------------
    def _entry(self) -> dict[str, Any]:
        fp = self.spec.fingerprint
        answers = {str(idx): wire.to_records(rep)[0]
                   for (f, idx), rep in sorted(self.memo.items()) if f == fp}
        out: dict[str, Any] = {"collection": self.spec.id, "memoization": self.spec.memoization,
               "answers": answers, "window": self.window, "sent": self.sent_in_window}
        counts = {str(idx): n for (f, idx), n in sorted(self.value_reports.items()) if f == fp}
        if counts:
            out["reports"] = counts
        if self.secret is not None:
            out["secret"] = self.secret.hex()
        return out

    def _save(self) -> None:
        if self.memo_path is not None:
            self.save(self.memo_path)

    def save(self, path: str | Path) -> None:
        """Write this collection's memo and cadence into ``path`` (other collections kept)."""
        path = Path(path)
        doc = _read_memo_file(path) if path.exists() else _empty_memo()
        doc["collections"][self.spec.fingerprint] = self._entry()
        if self.ledger is not None:
            doc["ledger"] = self.ledger.to_dict()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".memo-", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(doc, fh, separators=(",", ":"))
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def load(self, path: str | Path) -> None:
        """Restore this collection's memo and cadence from ``path`` (raises ValueError if the
        file is not a memo file or holds answers that do not fit the collection)."""
        doc = _read_memo_file(Path(path))
        raw_ledger = doc.get("ledger")
        if isinstance(raw_ledger, dict):
            try:
                loaded = DailyLedger.from_dict(raw_ledger)
            except (TypeError, ValueError, AttributeError) as exc:
                raise ValueError(f"memo file {path} has a bad ledger: {exc}") from None
            if self.ledger is None:
                self.ledger = loaded
            else:
                self.ledger.days = loaded.days
        entry = doc["collections"].get(self.spec.fingerprint)
        if entry is None:
            return
        try:
            memo = {}
            for idx_text, record in entry["answers"].items():
                idx = int(idx_text)
                if idx < 0 and self.spec.set_valued:
                    pass  # a set's key (see _set_key)
                elif not 0 <= idx < self.spec.domain.size:
                    raise ValueError(f"value index {idx} outside the domain")
                memo[(self.spec.fingerprint, idx)] = wire.from_records(self.oracle, [record])
            window, sent = entry["window"], entry["sent"]
            if window is not None and not isinstance(window, int):
                raise ValueError("window must be an integer or null")
            if not isinstance(sent, int) or sent < 0:
                raise ValueError("sent must be an integer >= 0")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"memo file {path} has a bad entry for collection "
                             f"{self.spec.id!r}: {exc}") from None
        counts = entry.get("reports") or {}
        if not isinstance(counts, dict) or not all(
                isinstance(n, int) and n >= 0 for n in counts.values()):
            raise ValueError(f"memo file {path} has bad report counts for collection "
                             f"{self.spec.id!r}")
        self.memo.update(memo)
        self.value_reports.update({(self.spec.fingerprint, int(i)): n
                                   for i, n in counts.items()})
        self.window, self.sent_in_window = window, sent
        if self.secret is None and isinstance(entry.get("secret"), str):
            self.secret = bytes.fromhex(entry["secret"])


def _empty_memo() -> dict[str, Any]:
    return {"format": MEMO_FORMAT, "version": MEMO_VERSION, "collections": {}}


def _read_memo_file(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read memo file {path}: {exc}") from None
    if (not isinstance(doc, dict) or doc.get("format") != MEMO_FORMAT
            or doc.get("version") != MEMO_VERSION or not isinstance(doc.get("collections"), dict)):
        raise ValueError(f"{path} is not a {MEMO_FORMAT} v{MEMO_VERSION} file")
    return doc


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
    """The gateway refused a request for good (a 4xx other than 429): ``status``, ``reason``
    (see docs/gateway.md) and ``index`` of the message at fault."""

    def __init__(self, status: int, answer: dict[str, Any]) -> None:
        super().__init__(f"{status} {answer.get('reason')}: {answer.get('detail')}")
        self.status, self.reason = status, answer.get("reason")
        self.index = answer.get("index")


class GatewayClient:
    """Posts report batches to the HTTP ingestion gateway (``ldpstream gateway``) instead of
    Kafka: for devices without Kafka credentials.  Same ``send``/``flush``/``close`` as
    :class:`Client`.

    One keep-alive connection; each ``send`` is one ``POST /v1/reports`` of one message
    (``application/octet-stream``, or ``application/json`` with ``fmt="json"``), answered
    only once the broker holds it.  429, 503 and lost connections are retried after
    ``Retry-After`` (at most ``retries`` times, then :class:`GatewayError` or the
    ``OSError``); another 4xx raises :class:`GatewayError` at once.  A retried request
    that had reached Kafka before its answer was lost is counted twice (docs/gateway.md).

    **Privacy Pass** (docs/privacy-pass.md): with ``issuer_url`` every report goes with
    one token of its (collection, window), obtained from ``ldpstream issuer`` and cached
    (:class:`ldpstream.privacypass.client.TokenWallet`): a one-report binary message
    carries it in ``Authorization: PrivateToken`` (the device key then goes in
    ``X-LDP-Key``), a JSON message in ``"tokens"``, a binary message of several reports
    as token frames.  At a window's edge, a token refused as of the wrong window
    (``token_window``, ``token_key_expired``: the device's clock and the gateway's
    disagree) is replaced by one of the neighbouring window, once.

    Parameters
    ----------
    url : str
        Base URL of the gateway, e.g. ``http://127.0.0.1:8080``.
    key : str, optional
        Device key of the fleet (``Authorization: Bearer``) when the gateway needs one.
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
                 timeout: float = 30.0, retries: int = 5, *, issuer_url: str | None = None,
                 device_secret: bytes | None = None, issuer_key: str | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        from urllib.parse import urlsplit

        if fmt not in ("binary", "json"):
            raise ValueError(f"fmt must be 'binary' or 'json', got {fmt!r}")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http(s)://host[:port], got {url!r}")
        self.fmt, self.key, self.timeout, self.retries = fmt, key, timeout, retries
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

    def post(self, body: bytes, content_type: str, token: bytes | None = None
             ) -> dict[str, Any]:
        """POST one body; the 202 answer (``accepted_messages``, ``accepted_reports``).
        ``token``: a Privacy Pass token in ``Authorization: PrivateToken``."""
        headers = {"Content-Type": content_type}
        if token is not None:
            from ldpstream.privacypass.tokens import authorization_header

            headers["Authorization"] = authorization_header(token)
            if self.key is not None:
                headers["X-LDP-Key"] = self.key
        elif self.key is not None:
            headers["Authorization"] = f"Bearer {self.key}"
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
                time.sleep(min(2.0 ** attempt * 0.1, 5.0))
                continue
            answer = json.loads(raw) if raw else {}
            if resp.status == 202:
                self.accepted_reports += int(answer.get("accepted_reports", 0))
                return dict(answer)
            if resp.status in (429, 503) and attempt < self.retries:
                time.sleep(float(resp.getheader("Retry-After") or 1))
                continue
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
                body = (len(tokens).to_bytes(2, "little") + b"".join(tokens)
                        + len(msg).to_bytes(4, "little") + msg)
                return self.post(body, "application/x-ldp-token-frames")
            except GatewayError as exc:
                # the gateway's clock puts the report in the neighbouring window
                if attempt or exc.reason not in ("token_window", "token_key_expired"):
                    raise
                window += spec.window_seconds * (1 if exc.reason == "token_key_expired" else -1)
        raise AssertionError("unreachable")  # pragma: no cover

    def send_many(self, messages: list[bytes]) -> dict[str, Any]:
        """Post several binary messages in one request (``application/x-ldp-frames``)."""
        body = b"".join(len(m).to_bytes(4, "little") + m for m in messages)
        return self.post(body, "application/x-ldp-frames")

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
