"""Poisoning measured: Cao, Jia & Gong's maximal gain attack (USENIX Security 2021) against
GRR, OUE and OLH, through today's gateway, with per-device tokens, and with a defence.

    .venv/bin/python bench/poisoning.py            # n = 100,000 honest users (~2 min)
    .venv/bin/python bench/poisoning.py --quick    # n = 20,000, ε ∈ {1, 4} (~15 s)

Setting (Cao et al. §3 and §7): n honest users hold items of a d = 102 domain (the size of
their IPUMS dataset) drawn from Zipf(1.5); r ∈ {1, 10} target items drawn at random (seed
fixed per row); the attacker controls m fake identities, a fraction β = m/(n + m) ∈ {1 %,
5 %}, that send MGA reports (``ldpcore.poisoning.mga_reports``).  The frequency gain is
G = Σ_t (f̃_t after − f̃_t before) on the same honest reports, so their noise cancels.

Columns:

* **theory**: Cao et al.'s expected MGA gain (``ldpcore.poisoning.expected_gain``; for
  OLH with the k* targets the best seed of ldpcore's hash family puts in one bucket);
* **(a) leaked key**: today's gateway with the fleet key shipped in every app accepts any
  number of reports per key: the table shows the attacker posting 10 reports per fake
  identity per window (β_eff = 10m/(n + 10m)); any volume is accepted, so G grows
  without bound towards the maximum (β_eff → 1);
* **(b) tokens**: with Privacy Pass tokens, quota 1 report per identity and window, each
  fake identity must be an attested device: β is bounded by the identities the attacker
  attests (Cao et al.'s setting);
* **(c) defences** on (b), applied by the server over the window's reports before
  estimating: *norm-sub* (Cao et al. §6.1 normalisation; on the sums, so it also runs at
  query time in ldpstream today) and *detection* (their §6.2 frequent-itemset detection of
  fake users, OUE and OLH only: ``ldpcore.poisoning.detect_fake_users``), with the fake
  reports it flags, the honest reports it removes, and the honest cost: the MSE of all
  estimates after the defence on a run without attack, over the MSE without it.

``--gateway`` first runs one row end to end on the real system (embedded tansu and Redis,
an aggregator worker, ``ldpstream gateway`` with device keys): honest devices post their
reports, then the attacker posts its MGA reports under the one leaked fleet key, 10 per
fake identity, as fast as it likes; the gain is read from the state the worker counted.

Results: stdout and bench/results/poisoning.md (docs/poisoning.md discusses them).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _results import write_results

import ldpcore
from ldpcore.poisoning import (
    detect_fake_users,
    expected_gain,
    frequency_gain,
    mga_reports,
    olh_best_collisions,
)

D = 102
MECHS = ("grr", "oue", "olh")
EPSILONS = (0.5, 1.0, 2.0, 4.0)
BETAS = (0.01, 0.05)
TARGETS = (1, 10)
LEAK_FACTOR = 10


def zipf(d: int, s: float = 1.5) -> np.ndarray:
    w = 1 / np.arange(1, d + 1) ** s
    return np.asarray(w / w.sum())


def estimate(o: Any, reports: ldpcore.Reports) -> np.ndarray:
    return np.asarray(o.estimate(o.aggregate(reports)))


def case(mech: str, eps: float, beta: float, r: int, n: int, seed: int) -> dict[str, Any]:
    """One row: the gains of every column (see the module docstring)."""
    rng = np.random.default_rng(seed)
    o: Any = ldpcore.make_oracle(mech, epsilon=eps, domain_size=D)
    dist = zipf(D)
    values = rng.choice(D, n, p=dist)
    truth = np.bincount(values, minlength=D) / n
    targets = np.sort(rng.choice(D, r, replace=False))
    f_t = float(truth[targets].sum())
    honest = o.perturb(values, rng=rng)
    before = estimate(o, honest)
    m = int(round(beta * n / (1 - beta)))
    fake = mga_reports(o, targets, m, rng=rng)
    both = ldpcore.Reports.concat([honest, fake])
    after = estimate(o, both)
    leak = mga_reports(o, targets, LEAK_FACTOR * m, rng=rng)
    leaked = estimate(o, ldpcore.Reports.concat([honest, leak]))
    supported = (float(olh_best_collisions(o, targets)[0]) if mech == "olh" else None)
    out: dict[str, Any] = {
        "f_t": f_t, "m": m, "k_star": supported,
        "theory": expected_gain(o, beta, r, f_t, supported),
        "leak": frequency_gain(leaked, before, targets),
        "tokens": frequency_gain(after, before, targets),
        "normsub": frequency_gain(ldpcore.postprocess(after, "norm-sub"),
                                  ldpcore.postprocess(before, "norm-sub"), targets),
    }
    if mech == "grr":
        out.update(detect=None, fake_flagged=None, honest_flagged=None, cost=None)
        return out
    det = detect_fake_users(o, both)
    kept = both[~det.flags]
    out["detect"] = frequency_gain(estimate(o, kept), before, targets)
    out["fake_flagged"] = float(det.flags[n:].mean())
    out["honest_flagged"] = int(det.flags[:n].sum())
    # honest cost: the same defence on a run without attack
    clean = detect_fake_users(o, honest)
    defended = estimate(o, honest[~clean.flags]) if clean.flagged else before
    out["cost"] = float(np.mean((defended - truth) ** 2) / np.mean((before - truth) ** 2))
    out["clean_flagged"] = clean.flagged
    return out


ROOT = Path(__file__).resolve().parents[1]
KEY = "fleetA:the-key-shipped-in-every-app"


def through_gateway(n: int, beta: float = 0.05, r: int = 10, eps: float = 1.0,
                    seed: int = 7) -> dict[str, Any]:
    """(a) on the real system: the MGA posted through the gateway with one leaked key."""
    import redis

    from ldpcore.collection import CollectionSpec
    from ldpstream.dev.servers import start_broker, start_redis, stop_processes
    from ldpstream.storage import CollectionCatalogue, load_state
    from producer.sdk import GatewayClient

    spec = CollectionSpec.from_dict({
        "id": "poisoned", "oracle": {"mechanism": "oue", "epsilon": eps},
        "domain": {"kind": "integers", "low": 0, "high": D - 1}, "min_reports": 1})
    o: Any = spec.oracle()
    rng = np.random.default_rng(seed)
    values = rng.choice(D, n, p=zipf(D))
    targets = np.sort(rng.choice(D, r, replace=False))
    honest = o.perturb(values, rng=rng)
    m = int(round(beta * n / (1 - beta)))
    fake = mga_reports(o, targets, LEAK_FACTOR * m, rng=rng)
    work = Path(tempfile.mkdtemp(prefix="ldp-poisoning-"))
    servers: list[Any] = []
    procs: list[subprocess.Popen[bytes]] = []
    try:
        (work / "kafka").mkdir()
        (work / "redis").mkdir()
        kafka = start_broker("tansu", work / "kafka")
        servers.append(kafka)
        rds = start_redis(work / "redis")
        servers.append(rds)
        client = redis.Redis.from_url(rds.url)
        CollectionCatalogue(client, "poison:").register(spec)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
        env.update({"LDP_KAFKA_BOOTSTRAP": kafka.bootstrap, "LDP_REDIS_URL": rds.url,
                    "LDP_REDIS_PREFIX": "poison:", "LDP_REPORTS_TOPIC": "poison",
                    "LDP_DLQ_TOPIC": "poison-dlq", "LDP_GATEWAY_PORT": "0",
                    "LDP_GATEWAY_KEYS": KEY, "LDP_FLUSH_INTERVAL_MS": "100",
                    "PYTHONPATH": str(ROOT)})
        for module in ("aggregator", "gateway"):
            log = open(work / f"{module}.log", "wb")  # noqa: SIM115 - the child owns it
            procs.append(subprocess.Popen([sys.executable, "-m", module], cwd=ROOT, env=env,
                                          stdout=log, stderr=subprocess.STDOUT))
        port, mark, deadline = 0, "ldpstream gateway: listening on http://", time.monotonic()
        while not port:
            for line in (work / "gateway.log").read_text(errors="replace").splitlines():
                if line.startswith(mark):
                    port = int(line[len(mark):].split()[0].rsplit(":", 1)[1])
            if time.monotonic() - deadline > 90 or procs[1].poll() is not None:
                raise RuntimeError((work / "gateway.log").read_text(errors="replace"))
            time.sleep(0.1)
        url, key = f"http://127.0.0.1:{port}", KEY.split(":", 1)[1]
        devices = GatewayClient(url, key=key)
        for s in range(0, n, 500):
            devices.send(spec, honest[s:s + 500])
        attacker = GatewayClient(url, key=key)  # the same key, taken from the app
        t0 = time.perf_counter()
        for s in range(0, len(fake), 2000):
            attacker.send(spec, fake[s:s + 2000])
        posted = time.perf_counter() - t0
        deadline = time.monotonic()
        while load_state(client, spec, prefix="poison:").n < n + len(fake):
            if time.monotonic() - deadline > 180:
                raise RuntimeError("the worker did not count every report in 180 s")
            time.sleep(0.2)
        state = load_state(client, spec, prefix="poison:")
        before = estimate(o, honest)
        after = np.asarray(o.estimate(state))
        return {"n": n, "m": len(fake), "accepted": attacker.accepted_reports,
                "seconds": posted, "gain": frequency_gain(after, before, targets),
                "in_process": frequency_gain(
                    estimate(o, ldpcore.Reports.concat([honest, fake])), before, targets),
                "counted": state.n}
    finally:
        stop_processes(procs, 20)
        for srv in reversed(servers):
            srv.stop()


def fmt(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "–"
    return f"{100 * x:.0f} %" if pct else f"{x:+.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="honest users")
    ap.add_argument("--quick", action="store_true", help="n = 20,000, ε ∈ {1, 4}")
    ap.add_argument("--gateway", action="store_true",
                    help="first run (a) end to end through the real gateway (OUE, ε = 1, "
                         "r = 10, β = 5 %%, 10 reports per fake identity)")
    args = ap.parse_args()
    n, epsilons = args.n, EPSILONS
    if args.quick:
        n, epsilons = 20_000, (1.0, 4.0)
    t0 = time.perf_counter()
    lines = [f"# Poisoning: maximal gain attack (Cao et al. 2021), n = {n:,} honest users, "
             f"d = {D}", "",
             "Frequency gain G = Σ over the r targets of (estimate after − before); 1.0 = 100 "
             "points of frequency.  Setting and columns: `bench/poisoning.py` docstring and "
             "docs/poisoning.md.", "",
             ]
    if args.gateway:
        g = through_gateway(min(n, 20_000))
        lines += [
            "## (a) end to end: the real gateway, one leaked key", "",
            f"OUE, ε = 1, d = {D}, r = 10: {g['n']:,} honest reports posted by devices, then "
            f"{g['m']:,} MGA reports (β = 5 %, {LEAK_FACTOR} per fake identity) posted by "
            f"one script under the fleet key in {g['seconds']:.1f} s; the gateway accepted "
            f"{g['accepted']:,}, the worker counted {g['counted']:,} reports in all.  "
            f"Frequency gain read from the counted state: **{g['gain']:+.3f}** (in-process "
            f"on the same reports: {g['in_process']:+.3f}).", ""]
        print("\n".join(lines[-3:]), flush=True)
    lines += [f"| protocol | ε | r | β | theory | (a) leaked key, {LEAK_FACTOR}×/id | (b) tokens, "
             "1/id | (c) norm-sub | (c) detection | fake flagged | honest flagged | honest "
             "cost (MSE ×) |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    seed = 0
    for mech in MECHS:
        for eps in epsilons:
            for r in TARGETS:
                for beta in BETAS:
                    seed += 1
                    c = case(mech, eps, beta, r, n, seed)
                    k = f" (k*={c['k_star']:.0f})" if c["k_star"] is not None else ""
                    cost = "–" if c["cost"] is None else f"{c['cost']:.3f}"
                    hf = "–" if c["honest_flagged"] is None else str(c["honest_flagged"])
                    lines.append(
                        f"| {mech.upper()} | {eps:g} | {r} | {100 * beta:g} % | "
                        f"{c['theory']:+.3f}{k} | {c['leak']:+.3f} | {c['tokens']:+.3f} | "
                        f"{c['normsub']:+.3f} | {fmt(c['detect'])} | "
                        f"{fmt(c['fake_flagged'], pct=True)} | {hf} | {cost} |")
                    print(lines[-1], flush=True)
    lines += ["", f"Runtime {time.perf_counter() - t0:.0f} s."]
    write_results("poisoning", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
