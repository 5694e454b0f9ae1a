"""Device-side SDK: perturb with a collection spec, memoize, publish to Kafka.

Permanent randomized response (RAPPOR, Erlingsson et al. 2014): a :class:`Device`
memoizes its randomized answer per (collection fingerprint, true value) and sends
the same answer every time it reports that value again.

What it protects: averaging. Without memoization a device that reports the same
value n times hands the server n independent noisy copies, and their majority
reveals the value (the privacy loss grows to n·ε).  With memoization repeats carry
no new information, so the guarantee for one value stays ε however often it is sent.

What it does not protect: (1) *changes* — a new true value gets a fresh answer, so
distinct values cost ε each (k values: up to k·ε) and a change of answer hints that
the value changed; (2) *linkability* — a stable answer can act as a tracking
identifier across reports (RAPPOR adds instantaneous randomization on top for that;
we do not); (3) the memo lives in process memory: a restarted device draws anew
unless the caller persists :attr:`Device.memo`.

>>> from ldpcore.collection import CollectionSpec
>>> spec = CollectionSpec.from_dict({"id": "os", "oracle": {"mechanism": "grr", "epsilon": 1.0},
...     "domain": {"kind": "categories", "labels": ["linux", "mac", "win"]}})
>>> dev = Device(spec)
>>> a, b = dev.report("mac"), dev.report("mac")
>>> a == b
True
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from ldpcore import Reports
from ldpcore.collection import CollectionSpec, encode_message
from ldpstream.collections_file import read_collections_file, select_collection

__all__ = ["Device", "Client", "load_spec", "fetch_spec"]


def load_spec(path: str | Path, collection: str | None = None) -> CollectionSpec:
    """Read one collection from a YAML/JSON file (a spec, a list, or {'collections': [...]})."""
    return select_collection(read_collections_file(path), collection, str(path))


def fetch_spec(api_url: str, collection: str, timeout: float = 10.0) -> CollectionSpec:
    """GET ``{api_url}/v1/collections/{id}`` from the query API and parse the spec."""
    url = f"{api_url.rstrip('/')}/v1/collections/{collection}"
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - operator URL
        raw = json.loads(resp.read())
    return CollectionSpec.from_dict(raw.get("spec", raw) if isinstance(raw, dict) else raw)


class Device:
    """One device: maps a value to the domain, perturbs with OS entropy, memoizes.

    Parameters
    ----------
    spec : CollectionSpec
    rng : numpy Generator, optional
        Only for tests and simulations; by default answers use OS entropy.
    """

    def __init__(self, spec: CollectionSpec, rng: np.random.Generator | None = None) -> None:
        self.spec = spec
        self.oracle = spec.oracle()
        self.rng = rng
        self.memo: dict[tuple[str, int], Reports] = {}

    def report(self, value: Any) -> Reports:
        """The (memoized) one-report batch for a label or number of the domain."""
        idx = int(self.spec.domain.index([value])[0])
        key = (self.spec.fingerprint, idx)
        rep = self.memo.get(key)
        if rep is None:
            rep = self.memo[key] = self.oracle.perturb([idx], rng=self.rng)
        return rep

    def message(self, value: Any, fmt: str = "binary") -> bytes:
        """The Kafka message value for one report (never contains the raw value)."""
        return encode_message(self.spec, self.report(value), fmt)


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
