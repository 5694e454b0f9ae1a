"""Screenshots of the dashboard over a demo state with hours of history.

Starts the embedded broker and Redis, one aggregator worker and the query API (as
``ldpstream up`` does, with the demo collections of :mod:`producer.demo`), publishes
simulated reports stamped into every 5-minute window of the last ``--hours`` hours
(the app-version collection sees a new release roll out, the latency drifts up),
then has headless Chromium screenshot ``/?static=1#<collection>/<range>``::

    python scripts/dashboard_snapshot.py                        # docs/dashboard*.png
    python scripts/dashboard_snapshot.py --keep                 # and leave it running

Everything it starts stops when it exits (unless ``--keep``, until Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ldpcore.collection import CollectionSpec, encode_message  # noqa: E402
from ldpctl.stack import _spawn, _wait_http  # noqa: E402
from ldpstream.dev.servers import (  # noqa: E402
    free_port,
    start_kafka,
    start_redis,
    stop_processes,
)
from ldpstream.storage import load_state  # noqa: E402
from producer.demo import demo_collections  # noqa: E402
from producer.sdk import Client  # noqa: E402
from producer.simulate import distribution  # noqa: E402

SHOTS = [("dashboard.png", "app-version", "6h"), ("dashboard-emoji.png", "emoji", "6h"),
         ("dashboard-latency.png", "latency-ms", "6h")]


def probabilities(spec: CollectionSpec, dist: str, phase: float) -> np.ndarray:
    """The demo distribution at ``phase`` in [0, 1] of the backfilled period."""
    p = distribution(dist, spec.domain.size)
    if spec.id == "app-version":  # a new release (the last label) rolls out
        p = p * (1 - 0.45 * phase)
        p[-1] += 0.45 * phase
    elif spec.id == "latency-ms":  # latency drifts up by about 30 %
        p = distribution(f"cauchy:{200 * (1 + 0.3 * phase):.0f},40", spec.domain.size)
    return p / p.sum()


def backfill(bootstrap: str, topic: str, specs: list[tuple[CollectionSpec, str]], hours: float,
             per_window: int, seed: int) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    sent: dict[str, int] = {}
    with Client(bootstrap, topic) as producer:
        for spec, dist in specs:
            w = spec.window_seconds
            last = int(time.time()) // w * w
            starts = list(range(last - int(hours * 3600) // w * w, last + 1, w))
            oracle = spec.oracle()
            for k, start in enumerate(starts):
                phase = k / max(1, len(starts) - 1)
                n = per_window if start < last else per_window // 3  # the window in progress
                n = int(n * (1 + 0.25 * np.sin(2 * np.pi * k / 48)))  # a daily-ish rhythm
                values = rng.choice(spec.domain.size, size=n, p=probabilities(spec, dist, phase))
                for lo in range(0, n, 5000):
                    batch = oracle.perturb(values[lo:lo + 5000], rng=rng)
                    producer.producer.send(topic, key=spec.id.encode(),
                                           value=encode_message(spec, batch, "binary"),
                                           timestamp_ms=(start + 1) * 1000)
                sent[spec.id] = sent.get(spec.id, 0) + n
            print(f"  {spec.id}: {sent[spec.id]:,} reports in {len(starts)} windows", flush=True)
    return sent


def screenshot(chromium: str, url: str, out: Path, size: str) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", f"--user-data-dir={profile}",
                        f"--window-size={size}", "--virtual-time-budget=15000",
                        f"--screenshot={out}", url], check=True, timeout=120,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "docs"), help="directory of the screenshots")
    ap.add_argument("--hours", type=float, default=7.0, help="history to backfill (hours)")
    ap.add_argument("--per-window", type=int, default=12000, help="reports per 5-min window")
    ap.add_argument("--size", default="1400,1260", help="browser window WxH")
    ap.add_argument("--keep", action="store_true", help="keep the stack running (Ctrl-C)")
    args = ap.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    work = Path(tempfile.mkdtemp(prefix="ldpstream-snapshot-"))
    demos = [(CollectionSpec.from_dict(s), d) for s, d in demo_collections()]
    cfile = work / "collections.json"
    cfile.write_text(json.dumps({"collections": [s for s, _ in demo_collections()]}))
    servers: list[Any] = []
    children: list[subprocess.Popen[bytes]] = []
    try:
        (work / "kafka").mkdir()
        (work / "redis").mkdir()
        kafka = start_kafka(work / "kafka")
        servers.append(kafka)
        redis_srv = start_redis(work / "redis")
        servers.append(redis_srv)
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
        env.update({"LDP_KAFKA_BOOTSTRAP": kafka.bootstrap, "LDP_REDIS_URL": redis_srv.url,
                    "LDP_COLLECTIONS_FILE": str(cfile), "LDP_API_PORT": str(port),
                    "LDP_API_HOST": "127.0.0.1", "PYTHONPATH": str(ROOT),
                    "LDP_METRICS_PORT": str(free_port())})
        children.append(_spawn([sys.executable, "-m", "aggregator"], env, work / "worker.log"))
        api = _spawn([sys.executable, "-m", "ldpctl", "serve"], env, work / "api.log")
        children.append(api)
        base = f"http://127.0.0.1:{port}"
        _wait_http(base + "/readyz", 60, api)
        print(f"backfilling {args.hours:g} h of windows into {base}", flush=True)
        sent = backfill(kafka.bootstrap, "ldp-reports", demos, args.hours, args.per_window, 5)
        import redis

        client = redis.Redis.from_url(redis_srv.url)
        deadline = time.monotonic() + 300
        while any(load_state(client, s).n < sent[s.id] for s, _ in demos):
            if time.monotonic() > deadline:
                raise RuntimeError("the worker did not count every report within 300 s")
            time.sleep(1)
        client.close()
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        if chromium:
            for name, cid, rng in SHOTS:
                url = f"{base}/?static=1#{cid}/{rng}"
                # The first load computes every bucket (the screenshot may come first);
                # the second is answered from the API's cache.
                screenshot(chromium, url, work / name, args.size)
                screenshot(chromium, url, out / name, args.size)
                print(f"  {out / name}", flush=True)
        else:
            print("chromium not found: no screenshots", flush=True)
        if args.keep:
            print(f"\nDashboard: {base}/  (Ctrl-C stops)", flush=True)
            while True:
                time.sleep(1)
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        stop_processes(reversed(children), 10)
        for server in reversed(servers):
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
