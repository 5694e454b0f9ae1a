"""The ``ldpstream`` command: one entry point, one verb per part of the system."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main", "build_parser"]


def _cmd_mechanisms(args: argparse.Namespace) -> int:
    import ldpcore

    for name in ldpcore.available_mechanisms():
        print(name)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    """In-process demo: simulated devices perturb, the server aggregates and estimates."""
    import numpy as np

    import ldpcore

    rng = np.random.default_rng(args.seed)
    d, n = args.domain_size, args.reports
    ranks = np.arange(1, d + 1)
    truth_p = ranks ** -1.5 / np.sum(ranks ** -1.5)
    values = rng.choice(d, size=n, p=truth_p)
    truth = np.bincount(values, minlength=d) / n
    print(f"{n} simulated devices, Zipf(1.5) over d={d}, epsilon={args.epsilon}")
    print(f"{'mechanism':<10}{'MSE (raw)':>14}{'MSE (norm-sub)':>16}{'top-5 estimates':>40}")
    from ldpcore.capabilities import FrequencyEstimates, MeanEstimates
    from ldpcore.registry import make_frequency_oracle, mechanisms_with

    for mech in sorted(set(mechanisms_with(FrequencyEstimates))
                       - set(mechanisms_with(MeanEstimates))):
        oracle = make_frequency_oracle(mech, epsilon=args.epsilon, domain_size=d)
        state = oracle.aggregate(oracle.perturb(values, rng=rng))
        est = oracle.estimate(state)
        mse = float(np.mean((est - truth) ** 2))
        mse_ns = float(np.mean((ldpcore.postprocess(est, "norm-sub") - truth) ** 2))
        top = " ".join(f"{x:.3f}" for x in est[:5])
        print(f"{mech:<10}{mse:>14.2e}{mse_ns:>16.2e}{top:>40}")
    print(f"{'truth':<10}{'':>30}{' '.join(f'{x:.3f}' for x in truth[:5]):>40}")
    return 0


def _health_url(cmdline: list[str], env: dict[str, str]) -> str | None:
    """Which URL proves the running verb alive (None: being alive is enough)."""
    def local(host: str | None) -> str:
        return "127.0.0.1" if host in (None, "", "0.0.0.0", "::") else str(host)

    if "serve" in cmdline:
        return (f"http://{local(env.get('LDP_API_HOST'))}:"
                f"{env.get('LDP_API_PORT') or 8000}/healthz")
    if "gateway" in cmdline:
        return (f"http://{local(env.get('LDP_GATEWAY_HOST'))}:"
                f"{env.get('LDP_GATEWAY_PORT') or 8080}/healthz")
    if "issuer" in cmdline:
        return (f"http://{local(env.get('LDP_ISSUER_HOST'))}:"
                f"{env.get('LDP_ISSUER_PORT') or 8090}/healthz")
    if "aggregate" in cmdline and (env.get("LDP_METRICS_PORT") or "0") != "0":
        return f"http://{local(env.get('LDP_METRICS_HOST'))}:{env['LDP_METRICS_PORT']}/healthz"
    return None


EXPERIMENTS = {
    "le-zia": "le_zia.py", "cormode": "cormode_range.py", "heavy-hitters": "heavy_hitters.py",
    "numeric": "numeric.py", "range-scale": "range_scale.py", "oracles": "oracles.py",
    "defaults": "defaults.py", "coverage": "coverage.py", "construction": "construction.py",
    "range-consistent": "range_consistent.py", "multiattr": "multiattr.py", "svim": "svim.py",
    "poisoning": "poisoning.py",
}


def _cmd_experiment(args: argparse.Namespace) -> int:
    """Run a reproduction/benchmark script of bench/ (results land in bench/results/)."""
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "bench" / EXPERIMENTS[args.name]
    if not script.is_file():
        print(f"{script} not found: experiments run from a source checkout", file=sys.stderr)
        return 2
    return subprocess.call([sys.executable, str(script), *args.rest])


def _cmd_health(args: argparse.Namespace) -> int:
    """Container health check: probe the main process's HTTP endpoint (exit 0 = healthy)."""
    import os
    import urllib.request
    from pathlib import Path

    url = args.url
    if url is None:
        try:
            cmdline = Path("/proc/1/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            cmdline = []
        url = _health_url(cmdline, dict(os.environ))
    if url is None:
        print("healthy (no HTTP endpoint to probe)")
        return 0
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as resp:  # noqa: S310 (loopback)
            ok = 200 <= resp.status < 300
    except OSError as exc:
        print(f"unhealthy: {url}: {exc}", file=sys.stderr)
        return 1
    print(f"{'healthy' if ok else 'unhealthy'}: {url}")
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    import aggregator.commands
    import gateway.commands
    import issuer.commands
    import producer.commands
    import query_api.commands
    from ldpstream.access import add_read_token_parser
    from ldpstream.sharding import add_migrate_parser

    from .clusterbench import add_bench_cluster_parsers
    from .soak import add_bench_soak_parser
    from .stack import add_up_parser

    parser = argparse.ArgumentParser(prog="ldpstream", description=__doc__)
    sub = parser.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("mechanisms", help="list the available ε-LDP mechanisms")
    p.set_defaults(func=_cmd_mechanisms)
    p = sub.add_parser("demo", help="in-process demo: devices → oracles → estimates")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--domain-size", type=int, default=64)
    p.add_argument("--reports", type=int, default=200_000)
    p.add_argument("--seed", type=int, default=None)
    p.set_defaults(func=_cmd_demo)
    add_up_parser(sub)
    add_read_token_parser(sub)
    add_migrate_parser(sub)
    # Each service registers its own verbs (and its benchmarks, below).
    producer.commands.add_commands(sub)
    aggregator.commands.add_commands(sub)
    query_api.commands.add_commands(sub)
    gateway.commands.add_commands(sub)
    issuer.commands.add_commands(sub)
    p = sub.add_parser("experiment", help="run a paper reproduction or benchmark of bench/")
    p.add_argument("name", choices=sorted(EXPERIMENTS))
    p.add_argument("rest", nargs=argparse.REMAINDER, help="arguments of the script (e.g. --quick)")
    p.set_defaults(func=_cmd_experiment)
    p = sub.add_parser("health", help="health check of the verb this container runs")
    p.add_argument("--url", default=None,
                   help="probe this URL (default: derived from PID 1's verb and LDP_… vars)")
    p.add_argument("--timeout", type=float, default=3.0)
    p.set_defaults(func=_cmd_health)
    bench = sub.add_parser("bench", help="benchmarks")
    bsub = bench.add_subparsers(dest="bench", required=True)
    aggregator.commands.add_bench_commands(bsub)
    query_api.commands.add_bench_commands(bsub)
    gateway.commands.add_bench_commands(bsub)
    add_bench_soak_parser(bsub)
    add_bench_cluster_parsers(bsub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from ldpstream.settings import ConfigError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as exc:  # a bad LDP_… variable: say which, no traceback
        print(f"ldpstream {args.verb}: configuration error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
