"""What ``ldpstream up`` and ``ldpstream up --cluster`` share: the working directory, the
demo collections file, the signals that end the run and the demo devices' command line.

A module of its own so that :mod:`ldpctl.stack` (which hands ``--cluster`` over) and
:mod:`ldpctl.cluster` (which runs it) import it, not each other.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["demo_collections", "with_retention", "open_workdir", "close_workdir",
           "write_demo_collections", "stop_on_signals", "simulate_argv"]

Demos = list[tuple[dict[str, Any], str]]
"""(collection spec, value distribution of its simulated devices) pairs."""


def demo_collections() -> Demos:
    """The producer's demo collections (a call: the top floor may import the services)."""
    from producer.demo import demo_collections as demos

    return demos()


def with_retention(demos: Demos, seconds: int) -> Demos:
    """The demo specs with ``retention_seconds`` set (their fingerprint follows).

    >>> with_retention([({"id": "a", "fingerprint": "x"}, "zipf")], 3600)
    [({'id': 'a', 'retention_seconds': 3600}, 'zipf')]
    """
    out = []
    for spec, dist in demos:
        spec = {k: v for k, v in spec.items() if k != "fingerprint"}
        spec["retention_seconds"] = max(1, seconds)
        out.append((spec, dist))
    return out


def open_workdir(data_dir: str | None, prefix: str) -> tuple[Path, bool]:
    """``--data-dir``, made if missing, or a new temporary directory; and whether it is
    temporary (removed by :func:`close_workdir` unless ``--keep``)."""
    work = Path(data_dir or tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    return work, data_dir is None


def close_workdir(work: Path, temporary: bool, keep: bool) -> None:
    """Remove a temporary working directory (``--data-dir`` and ``--keep`` keep it)."""
    if temporary and not keep:
        shutil.rmtree(work, ignore_errors=True)
        print(f"stopped; removed {work}.", flush=True)
    else:
        print(f"stopped; logs and data kept in {work}.", flush=True)


def write_demo_collections(work: Path, retention_seconds: int) -> tuple[Demos, Path]:
    """The demo collections with that retention, and the ``collections.json`` in ``work``
    that registers them (``LDP_COLLECTIONS_FILE``)."""
    demos = with_retention(demo_collections(), retention_seconds)
    cfile = work / "collections.json"
    cfile.write_text(json.dumps({"collections": [spec for spec, _ in demos]}, indent=1))
    return demos, cfile


def stop_on_signals() -> dict[str, bool]:
    """A flag ``{"now": …}`` that SIGINT and SIGTERM set from now on."""
    stop = {"now": False}

    def on_signal(signum: int, frame: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    return stop


def simulate_argv(spec_id: str, dist: str, cfile: Path, rate: float,
                  gateway: str | None = None) -> list[str]:
    """The command line of one demo collection's devices: endless reports at ``rate``/s,
    to Kafka or, given ``gateway``, through its ``POST /v1/reports``.

    >>> simulate_argv("a", "zipf", Path("c.json"), 10.0, "http://g")[-2:]
    ['--gateway', 'http://g']
    """
    return [sys.executable, "-m", "ldpctl", "simulate", "--collection", spec_id,
            "--collections-file", str(cfile), "--dist", dist, "--reports", str(10**12),
            "--devices", "50000", "--rate", str(rate), "--batch-size", "1,16,64",
            "--no-progress", *(["--gateway", gateway] if gateway else [])]
