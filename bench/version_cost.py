"""CPU the query API spends per *new state version*, per collection kind (no HTTP, no Redis).

The collections of ``ldpstream bench api`` (d = 1,024, n ≈ 10^6: OLH, HH, a two-attribute
``multi``; :func:`query_api.bench._spec`, :func:`~query_api.bench._state`) each get their
answer kinds of :data:`query_api.bench.KIND_PATHS` computed as the service computes them
(its shared-parts cache set, the state named by its version, kept ``auto`` choices), once
to make the choices, then for ``--versions`` new versions (a flush of 1,000 reports each)
at a fresh confidence level: the CPU (``time.process_time``) of one version's answers.

``--baseline CHECKOUT`` runs the same measurement on another checkout's code (a child
process with that checkout first on the path, this environment), the two interleaved
round by round, and prints them side by side::

    .venv/bin/python bench/version_cost.py --baseline ../main
    .venv/bin/python bench/version_cost.py --profile olh     # cProfile of the versions
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

KINDS = ("olh", "hh", "multi")
HERE = Path(__file__).resolve().parents[1]


WINDOWS: list[Any] = []
"""OLH: the four windows of its state (the newest one flushed into), for the series."""


def series(labels: Any, slot: Any) -> Any:
    """``series?top=5``: the whole range's ranking (its state summed from the windows'),
    and the newest window's (the one a flush changed) frequencies; the other windows'
    answers are cached."""
    from query_api import estimates as E
    from query_api.parts import STATE_KEY
    from query_api.routes.series import _ranking

    only = "only" in inspect.signature(E.frequencies).parameters

    def answer(o: Any, s: Any, ne: float, c: float) -> Any:
        whole = o.new_state()
        for w in WINDOWS:
            whole += w
        idx = _ranking(o, whole)[:5].tolist()
        last = WINDOWS[-1]
        named = STATE_KEY.set((last, ("bucket", last.n)))
        try:
            if only:  # the followed values' rows only (as the series asks, where it can)
                rows = E.frequencies(o, last, labels=labels, method="auto", confidence=c,
                                     n_effective=float(last.n), choice=slot, only=idx)
                return {"rows": rows["estimates"]}
            rows = E.frequencies(o, last, labels=labels, method="auto", confidence=c,
                                 n_effective=float(last.n), choice=slot)
        finally:
            STATE_KEY.reset(named)
        return {"rows": [rows["estimates"][i] for i in idx]}

    return answer


def _answers(kind: str, spec: Any, choices: Any) -> list[tuple[str, Any]]:
    """(answer kind, f(oracle, state, n_eff, confidence)) as the routes call them."""
    from query_api import estimates as E
    from query_api.domain import index_offset, labels_of

    if kind == "olh":
        labels = labels_of(spec)
        full = choices.slot(("x", "full"))
        sub = choices.slot(("x", "subset", (3, 10)))
        return [
            ("frequencies", lambda o, s, ne, c: E.frequencies(
                o, s, labels=labels, method="auto", confidence=c, n_effective=ne,
                choice=full, encoded=True)),
            ("subset", lambda o, s, ne, c: E.subset(
                o, s, [3, 10], method="auto", confidence=c, n_effective=ne, choice=sub)),
            ("heavy-hitters", lambda o, s, ne, c: E.heavy_hitters(
                o, s, 10, labels=labels, offset=index_offset(spec), confidence=c,
                n_effective=ne, choice=full)),
            ("series (4 windows)", series(labels, choices.slot(("x", "bucket", "full")))),
        ]
    if kind == "hh":
        return [
            ("range", lambda o, s, ne, c: E.range_answer(o, s, 100, 600, confidence=c,
                                                         method=None, n_effective=ne)),
            ("quantiles", lambda o, s, ne, c: E.quantiles(o, s, [0.5, 0.9], confidence=c,
                                                          n_effective=ne)),
            ("cdf", lambda o, s, ne, c: E.cdf(o, s, confidence=c, n_effective=ne)),
            ("histogram", lambda o, s, ne, c: E.histogram(o, s, confidence=c, n_effective=ne)),
        ]
    from query_api.routes.attributes import _per_attribute

    labels = labels_of(spec.attribute_spec("a"))
    slot = choices.slot(("x", "attribute", "a", "full"))
    compute = _per_attribute("a", lambda o, s, ne: E.frequencies(
        o, s, labels=labels, method="auto", confidence=CONF[0], n_effective=ne, choice=slot,
        encoded=True))

    def attr(o: Any, s: Any, ne: float, c: float) -> Any:
        CONF[0] = c
        return compute(o, s, ne)

    return [("attribute frequencies", attr)]


CONF = [0.95]


def measure(kind: str, versions: int, profile: bool = False) -> dict[str, Any]:
    from query_api import bench as B
    from query_api.cache import ByteLRU, size_of_state
    from query_api.choices import Choices
    from query_api.parts import SHARED, STATE_KEY

    spec = B._spec("x", kind)
    oracle = spec.oracle()
    rng = np.random.default_rng(1)
    if kind == "olh":  # four windows, as the bench writes them (the series reads them)
        WINDOWS[:] = [B._state(spec, kind, B.N // 4, rng) for _ in range(4)]
        state = oracle.new_state()
        for w in WINDOWS:
            state += w
    else:
        state = B._state(spec, kind, B.N, rng)
    deltas = [B._state(spec, kind, B.FLUSH_REPORTS, rng) for _ in range(4)]
    memo = ByteLRU(1 << 30, getsizeof=size_of_state)
    answers = _answers(kind, spec, Choices())
    per: dict[str, list[float]] = {name: [] for name, _ in answers}
    outputs: list[Any] = []

    def run(tag: int, st: Any, confidence: float, record: bool) -> None:
        token = SHARED.set(memo)
        named = STATE_KEY.set((st, ("version", kind, tag, st.n)))
        try:
            for name, f in answers:
                t0 = time.process_time()
                out = f(oracle, st, float(st.n), confidence)
                if record:
                    per[name].append(1e3 * (time.process_time() - t0))
                    outputs.append(out)
        finally:
            STATE_KEY.reset(named)
            SHARED.reset(token)

    run(0, state, 0.95, False)  # the collection's first answers: auto choices made
    prof: Any = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    for v in range(1, versions + 1):
        state = state + deltas[v % len(deltas)]
        if WINDOWS:
            WINDOWS[-1] = WINDOWS[-1] + deltas[v % len(deltas)]
        run(v, state, 0.9 + v * 1e-4, True)
    if prof is not None:
        prof.disable()
        import pstats

        pstats.Stats(prof).sort_stats("cumulative").print_stats(45)
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    total = [sum(x) for x in zip(*per.values(), strict=True)]
    if os.environ.get("VERSION_COST_DUMP"):  # the answers, to compare two checkouts'
        Path(os.environ["VERSION_COST_DUMP"]).write_text(_dump(outputs))
    return {"total": float(np.median(total)),
            "per": {k: float(np.median(v)) for k, v in per.items()}}


def _dump(outputs: list[Any]) -> str:
    """The answers as JSON (encoded rows as their rows; no ``age_s``: it differs from run
    to run)."""
    import orjson

    def enc(x: Any) -> Any:
        if hasattr(x, "text") and isinstance(getattr(x, "text"), bytes):
            return enc(orjson.loads(x.text))  # encoded rows: their numbers
        if isinstance(x, dict):  # an age in seconds differs from run to run
            return {k: enc(v) for k, v in x.items() if k != "age_s"}
        if isinstance(x, list):
            return [enc(v) for v in x]
        return x

    return orjson.dumps([enc(o) for o in outputs], option=orjson.OPT_SERIALIZE_NUMPY
                        | orjson.OPT_INDENT_2).decode()


def _child(root: Path, kind: str, versions: int) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json") as dump:
        env = {**os.environ, "PYTHONPATH": str(root), "VERSION_COST_DUMP": dump.name}
        out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", kind,
                              "--versions", str(versions)], cwd=root, env=env, check=True,
                             capture_output=True, text=True).stdout
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        result["answers"] = json.loads(Path(dump.name).read_text())
    return result


def _difference(a: Any, b: Any) -> float:
    """The largest relative difference between two answers' numbers (inf: other shapes or
    other strings)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return math.inf
        return max((_difference(a[k], b[k]) for k in a), default=0.0)
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return math.inf
        return max((_difference(x, y) for x, y in zip(a, b, strict=True)), default=0.0)
    if (isinstance(a, (int, float)) and isinstance(b, (int, float))
            and not isinstance(a, bool) and not isinstance(b, bool)):
        if a == b:
            return 0.0
        return abs(a - b) / max(abs(a), abs(b))
    return 0.0 if a == b else math.inf


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--versions", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--baseline", metavar="CHECKOUT")
    p.add_argument("--kinds", nargs="*", default=list(KINDS), choices=KINDS)
    p.add_argument("--profile", choices=KINDS)
    p.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.versions)))
        return 0
    if args.profile:
        sys.path.insert(0, str(HERE))
        print(json.dumps(measure(args.profile, args.versions, profile=True)))
        return 0
    roots = {"this": HERE}
    if args.baseline:
        roots = {"baseline": Path(args.baseline).resolve(), **roots}
    res: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _ in range(args.rounds):  # interleaved: the machine's load falls on both alike
        for kind in args.kinds:
            for name, root in roots.items():
                res.setdefault((kind, name), []).append(_child(root, kind, args.versions))
    print(f"CPU ms per new state version (process_time, median of {args.versions} versions, "
          f"best of {args.rounds} rounds)\n")
    names = list(roots)
    print(f"{'kind':<28}" + "".join(f"{n:>12}" for n in names)
          + ("   ratio" if len(names) > 1 else "") + "   answers")
    for kind in args.kinds:
        best = {n: min(res[(kind, n)], key=lambda r: r["total"]) for n in names}
        rows = [("TOTAL " + kind, {n: best[n]["total"] for n in names})]
        rows += [(f"  {a}", {n: min(r["per"][a] for r in res[(kind, n)]) for n in names})
                 for a in best[names[0]]["per"]]
        first = [res[(kind, n)][0]["answers"] for n in names]
        diff = _difference(first[0], first[-1])
        for i, (label, vals) in enumerate(rows):
            ratio = (f"{vals[names[0]] / max(vals[names[-1]], 1e-9):>8.2f}"
                     if len(names) > 1 else "")
            tail = ("" if i or len(names) < 2 else "   identical" if diff == 0
                    else f"   max relative difference {diff:.1e}")
            print(f"{label:<28}" + "".join(f"{vals[n]:>12.2f}" for n in names) + ratio + tail)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
