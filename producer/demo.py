"""The demo collections of ``ldpstream up``: what they hold and how devices are simulated.

Each collection is fed by one ``ldpstream simulate --devices 50000 --rate 400`` process
(started by ``ldpctl/stack.py``), i.e. a population of 50,000 simulated devices
with the simulator's default churn (5 % of the devices replaced by new ones every
window) and presence (a device reports in a window with probability 0.9).  Every
collection keeps the default cadence and memoization: a device sends at most one
report per 5-minute window, always the same permanent answer for its value.  So a
window holds about 45,000 reports however long the demo runs, and an answer over
several windows must use the effective sample size of
:func:`ldpcore.longitudinal.effective_sample_size` (about one window's worth), not
the number of reports.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ldpcore

__all__ = ["demo_collections", "HISTOGRAMS"]

HISTOGRAMS = Path(__file__).parent / "data" / "real_histograms.json"


def _emoji_labels() -> list[str]:
    raw = json.loads(HISTOGRAMS.read_text())
    ds = next(d for d in raw["datasets"] if d["name"].startswith("emoji/"))
    return [str(x) for x in ds["labels"]]


def demo_collections() -> list[tuple[dict[str, Any], str]]:
    """(collection spec, simulator distribution) pairs for the embedded demo."""
    versions = [f"v{major}.{minor}" for major in range(1, 9) for minor in range(8)]
    out: list[tuple[dict[str, Any], str]] = [
        ({"id": "app-version", "description": "app version in use (OLH, Zipf)",
          "oracle": {"mechanism": "olh", "epsilon": 1.0},
          "domain": {"kind": "categories", "labels": versions},
          "window_seconds": 300, "min_reports": 2000}, "zipf:1.3"),
        ({"id": "adult-race", "description": "UCI Adult race histogram (GRR)",
          "oracle": {"mechanism": "grr", "epsilon": 1.0},
          "domain": {"kind": "categories",
                     "labels": ["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo",
                                "Other"]},
          "window_seconds": 300, "min_reports": 1000},
         f"hist:{HISTOGRAMS}:adult/race"),
        ({"id": "emoji", "description": "emoji use, emojitracker snapshot (HCMS)",
          "oracle": {"mechanism": "hcms", "epsilon": 2.0},
          "domain": {"kind": "categories", "labels": _emoji_labels()},
          "window_seconds": 300, "min_reports": 5000},
         f"hist:{HISTOGRAMS}:emoji/emojitracker_2016-03"),
        ({"id": "latency-ms", "description": "request latency in ms (hierarchical histogram)",
          "oracle": {"mechanism": "hh", "epsilon": 1.0},
          "domain": {"kind": "integers", "low": 0, "high": 1023},
          "window_seconds": 300, "min_reports": 2000}, "cauchy:200,40"),
    ]
    if "sw" in ldpcore.available_mechanisms():
        out.append(({"id": "session-minutes", "description": "session length (Square Wave)",
                     "oracle": {"mechanism": "sw", "epsilon": 1.0},
                     "domain": {"kind": "interval", "low": 0.0, "high": 60.0, "bins": 256},
                     "window_seconds": 300, "min_reports": 2000}, "geometric:0.08"))
    return out
