"""Generate the shared privacy-budget vectors (``sdks/vectors/budget/ledger.json``).

Each case is a fleet budget, a device secret, the served collections and a sequence of
reports, run through the Python SDK (``producer.sdk.Device`` on one shared store, as
docs/budget.md "Enforced on the device"): for every report its collection, value and time,
what it costs before it is made (``Device.cost``), whether it is made (``Device.message``
is not None) and the ε spent that UTC day after it; at the end the store's ``"ledger"`` and
each collection's per-value report counts (keyed by HMAC-SHA256 of the secret, never the
value).  The TypeScript and Java SDKs replay them (``test/budget.test.ts``,
``BudgetTest.java``).

``python sdks/vectors/budget/generate.py`` rewrites the file (``--check`` compares);
``tests/sdks/test_budget_vectors.py`` runs the check.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
OUT = HERE / "ledger.json"
DAY = 20_000 * 86_400  # a UTC midnight
H = 3600

LABELS = ["a", "b", "c", "d", "e", "f", "g", "h"]


def _cat(cid: str, mech: str, eps: float, memo: str, **extra: Any) -> dict[str, Any]:
    oracle = {"mechanism": mech, "epsilon": eps, **extra.pop("oracle", {})}
    return {"id": cid, "oracle": oracle, "domain": {"kind": "categories", "labels": LABELS},
            "memoization": memo, "window_seconds": H, **extra}


def _two(mech: str, **oracle: Any) -> dict[str, Any]:
    return _cat(f"tl-{mech}", mech, 2.0, "two-level", epsilon_1=1.0, oracle=oracle)


SETS = {"id": "apps", "oracle": {"mechanism": "ps", "epsilon": 1.0, "length": 3},
        "domain": {"kind": "categories", "labels": [f"app{i}" for i in range(70)]},
        "window_seconds": H}

# (name, budget, collections, steps as (collection index, value, now))
CASES: list[tuple[str, float, list[dict[str, Any]], list[tuple[int, Any, float]]]] = [
    ("fresh answers stop at the budget; the next UTC day starts afresh", 2.5,
     [_cat("fresh", "grr", 1.0, "none")],
     [(0, "a", DAY + h * H) for h in range(5)] + [(0, "a", DAY + 86_400)]),
    ("a memoized answer repeats for free, a new value costs epsilon", 2.0,
     [_cat("memo", "grr", 1.5, "permanent")],
     [(0, "a", DAY + h * H) for h in range(6)] + [(0, "b", DAY + 6 * H),
                                                   (0, "a", DAY + 7 * H)]),
    *[(f"two-level {m}: epsilon_report per report until the value's epsilon_inf", 10.0,
       [_two(m, **({"g": 3} if m == "olh" else {}))],
       [(0, "c", DAY + h * H) for h in range(7)] + [(0, "d", DAY + 7 * H)])
      for m in ("grr", "sue", "oue", "olh", "blh", "hrr")],
    ("two-level: a second value runs into the budget", 3.0, [_two("grr")],
     [(0, "a", DAY + h * H) for h in range(5)] + [(0, "b", DAY + h * H) for h in range(5, 9)]),
    ("collections share one ledger through the store", 3.0,
     [_cat("col-a", "grr", 1.0, "none"), _cat("col-b", "oue", 1.5, "none")],
     [(0, "a", DAY), (1, "b", DAY), (0, "a", DAY + H), (1, "b", DAY + 2 * H),
      (0, "a", DAY + 86_400), (1, "b", DAY + 86_400)]),
    ("the cadence refuses first, and a refused report costs nothing", 3.0,
     [_cat("cad", "grr", 1.0, "none", reports_per_window=2)],
     [(0, "a", DAY + 10), (0, "b", DAY + 20), (0, "c", DAY + 30), (0, "d", DAY + H),
      (0, "e", DAY + H + 1), (0, "f", DAY + 2 * H)]),
    ("only today and yesterday are kept", 1.0, [_cat("roll", "grr", 1.0, "none")],
     [(0, "a", DAY), (0, "a", DAY + 86_400), (0, "a", DAY + 2 * 86_400),
      (0, "a", DAY + 2 * 86_400 + H)]),
    ("sets: one answer per set, keyed by the set", 2.0, [SETS],
     [(0, ["app1", "app69"], DAY), (0, ["app69", "app1"], DAY + H), (0, ["app3"], DAY + 2 * H),
      (0, ["app1"], DAY + 3 * H), (0, ["app69", "app1"], DAY + 4 * H)]),
]


def case(name: str, budget: float, decls: list[dict[str, Any]],
         steps: list[tuple[int, Any, float]], secret: bytes) -> dict[str, Any]:
    from ldpcore.collection import CollectionSpec
    from producer.sdk import Device
    from producer.store import MemoryStore

    store = MemoryStore()
    specs = [CollectionSpec.from_dict(d) for d in decls]
    devices = [Device(s, store=store, secret=secret, budget=budget) for s in specs]
    out = []
    for i, value, now in steps:
        dev = devices[i]
        cost = dev.cost(value)
        made = dev.message(value, now=now) is not None
        ledger = dev.ledger
        assert ledger is not None
        out.append({"collection": i, "value": value, "now": now, "cost": cost, "made": made,
                    "spent": ledger.spent(now)})
    doc = store.snapshot()
    return {"name": name, "budget": budget, "secret": secret.hex(),
            "collections": [json.loads(s.to_json()) for s in specs], "steps": out,
            "ledger": doc["ledger"],
            "reports": {s.fingerprint: doc["collections"][s.fingerprint].get("reports", {})
                        for s in specs if s.fingerprint in doc["collections"]}}


def generate() -> str:
    import hashlib

    cases = [case(name, budget, decls, steps,
                  hashlib.sha256(f"budget vector {i}".encode()).digest()[: 16 + 8 * (i % 3)])
             for i, (name, budget, decls, steps) in enumerate(CASES)]
    doc = {"format": "ldpstream-sdk-vectors", "version": 1, "mechanism": "budget",
           "contract": "docs/budget.md, Enforced on the device; docs/wire-format.md §6",
           "cases": cases}
    return json.dumps(doc, indent=1) + "\n"


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from ldpstream.dev.generated import write_or_check

    code = write_or_check({OUT: generate()}, check="--check" in argv, command=f"python {__file__}")
    if "--check" not in argv:
        print(f"wrote {OUT}")
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
