"""``ldpstream bench soak``: run ``ldpstream up`` for N minutes and watch every process's memory.

Starts ``python -m ldpctl up`` (the demo rate unless ``--rate`` says otherwise) in a
temporary data directory, finds its processes (the ``up`` supervisor itself, the broker,
Redis, the aggregator worker, the API and the simulated devices, summed), and every
``--interval`` seconds samples each one's resident set size (``VmRSS`` of
``/proc/PID/status``), plus three figures of what the stack holds:

* **counted**: reports counted in Redis (the sum of ``n`` over every window hash);
* **retained**: records the broker still keeps on the reports topic, the sum over its
  partitions of ``end offset - log start offset`` (ListOffsets latest and earliest);
  it stays bounded only when counted records are released (DeleteRecords);
* **redis used**: Redis's own ``used_memory``;
* **broker disk**: the disk Apache Kafka's log directory takes (tansu keeps none).

At the end it stops the stack (SIGINT, as Ctrl-C would), prints one table of samples and
one of figures per process, MB at start and at the end, the peak, and two least-squares
slopes in MB/min: over the whole run after the first ``--warmup`` minutes, and over its
last half (a process whose memory is bounded has a last-half slope near 0), and writes
them to ``bench/results/soak.md`` (``--out`` names another file).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ldpstream.dev.servers import _die_with_parent, free_port

__all__ = ["ROLES", "Sample", "add_bench_soak_parser", "classify", "run_soak", "slope"]

ROOT = Path(__file__).resolve().parents[1]

#: The processes of ``ldpstream up``, in the order the tables show them.
ROLES = ("supervisor", "broker", "redis", "worker", "api", "devices")


def classify(cmdline: list[str]) -> str | None:
    """Which process of ``up`` a command line is (one of :data:`ROLES`), else None.

    >>> classify(["/usr/bin/java", "-Xmx512m", "-cp", "libs/*", "kafka.Kafka", "s.properties"])
    'broker'
    >>> classify(["python", "-m", "ldpstream", "simulate", "--collection", "emoji"])
    'devices'
    >>> classify(["python", "-m", "ldpctl", "serve"])
    'api'
    >>> classify(["/usr/bin/redis-server 127.0.0.1:6379"])
    'redis'
    >>> classify(["bash"]) is None
    True
    """
    text = " ".join(cmdline)
    # Redis rewrites its title into argv[0] ("redis-server 127.0.0.1:6379")
    name = Path(cmdline[0].split(" ")[0]).name if cmdline else ""
    if name.startswith("tansu") or "kafka.Kafka" in cmdline:
        return "broker"
    if name in ("redis-server", "valkey-server"):
        return "redis"
    if "-m aggregator" in text or " aggregate" in text:
        return "worker"
    # the verbs run as ``ldpstream VERB``, ``python -m ldpctl VERB`` or ``-m ldpstream VERB``
    verb = re.search(r"\b(?:ldpstream|ldpctl) (serve|simulate|up)\b", text)
    return {"serve": "api", "simulate": "devices", "up": "supervisor"}.get(
        verb.group(1) if verb else "")
    return None


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [p.decode(errors="replace") for p in raw.split(b"\0") if p]


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # the command name (field 2) may hold spaces: the ppid follows its closing ')'
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(entry.name))
    return out


def rss_mb(pid: int) -> float | None:
    """Resident set size of ``pid`` in MB (``VmRSS``), None once it has gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ``ys`` over ``xs`` (0 with fewer than two points).

    >>> slope([0, 1, 2], [1, 3, 5])
    2.0
    """
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


@dataclass
class Sample:
    """One sampling instant: minutes since the stack came up and every figure then."""

    minute: float
    rss: dict[str, float]
    counted: int | None
    retained: int | None
    redis_used_mb: float | None
    #: disk blocks of Apache Kafka's log directory (None for tansu: memory storage)
    broker_disk_mb: float | None = None


@dataclass
class Stack:
    """The running ``up`` process, its endpoints (read from its output) and its processes."""

    proc: subprocess.Popen[bytes]
    log: Path
    data: Path
    bootstrap: str = ""
    redis_url: str = ""
    broker: str = ""
    pids: dict[str, list[int]] = field(default_factory=dict)

    def discover(self) -> None:
        found: dict[str, list[int]] = {"supervisor": [self.proc.pid]}
        for pid in _children(self.proc.pid):
            role = classify(_cmdline(pid))
            if role is not None:
                found.setdefault(role, []).append(pid)
        self.pids = found


def _start(args: argparse.Namespace, work: Path) -> Stack:
    log = work / "up.out"
    port = free_port()
    # A process: the soak measures the memory of up's processes, then stops it as Ctrl-C does.
    argv = [sys.executable, "-m", "ldpctl", "up", "--port", str(port), "--rate",
            str(args.rate), "--data-dir", str(work / "data"), *args.up_args]
    if args.broker:
        argv += ["--broker", args.broker]
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    stack = Stack(proc, log, work / "data")
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if proc.poll() is not None:
            raise RuntimeError(f"ldpstream up exited with code {proc.returncode}:\n{text}")
        if "Dashboard:" in text:
            m = re.search(r"broker\s+(\S+:\d+) \((\S+)", text)
            r = re.search(r"redis\s+(redis://\S+)", text)
            if m is None or r is None:
                raise RuntimeError(f"cannot read the broker and Redis of ldpstream up:\n{text}")
            stack.bootstrap = m.group(1)
            stack.broker = "kafka" if m.group(2).startswith("Apache") else "tansu"
            stack.redis_url = r.group(1)
            break
        time.sleep(0.5)
    else:
        raise RuntimeError(f"ldpstream up did not come up:\n{log.read_text(errors='replace')}")
    time.sleep(2)  # the devices start after the Dashboard line
    stack.discover()
    return stack


def _stop(stack: Stack) -> str:
    if stack.proc.poll() is None:
        stack.proc.send_signal(signal.SIGINT)
        try:
            stack.proc.wait(90)
        except subprocess.TimeoutExpired:
            stack.proc.kill()
            stack.proc.wait(10)
    return stack.log.read_text(errors="replace")


class _Probe:
    """Reads the counted reports (Redis) and the records retained by the broker."""

    def __init__(self, stack: Stack, topic: str) -> None:
        import redis

        self.redis = redis.Redis.from_url(stack.redis_url, socket_timeout=10)
        self.bootstrap = stack.bootstrap
        self.topic = topic
        self.consumer: Any = None

    def counted(self) -> int | None:
        try:
            keys = list(self.redis.scan_iter(match="ldp:state:*", count=1000))
            pipe = self.redis.pipeline(transaction=False)
            for k in keys:
                pipe.hget(k, "n")
            return sum(int(v) for v in pipe.execute() if v is not None)
        except Exception:  # noqa: BLE001 - a figure is missing, the soak goes on
            return None

    def redis_used_mb(self) -> float | None:
        try:
            return float(self.redis.info("memory")["used_memory"]) / 2**20
        except Exception:  # noqa: BLE001
            return None

    def retained(self) -> int | None:
        try:
            from kafka import KafkaConsumer, TopicPartition

            if self.consumer is None:
                self.consumer = KafkaConsumer(bootstrap_servers=self.bootstrap,
                                              request_timeout_ms=20000)
            parts = self.consumer.partitions_for_topic(self.topic) or set()
            tps = [TopicPartition(self.topic, p) for p in parts]
            if not tps:
                return None
            first = self.consumer.beginning_offsets(tps)
            last = self.consumer.end_offsets(tps)
            return int(sum(last[tp] - first[tp] for tp in tps))
        except Exception:  # noqa: BLE001
            return None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.consumer is not None:
                self.consumer.close()
        with contextlib.suppress(Exception):
            self.redis.close()


def disk_mb(path: Path) -> float | None:
    """Disk space allocated under ``path`` in MB (blocks, so sparse index files count
    what they use), None if there is no such directory."""
    if not path.is_dir():
        return None
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(root, name)).st_blocks * 512
    return total / 2**20


def _sample(stack: Stack, probe: _Probe, t0: float) -> Sample:
    if stack.proc.poll() is None:
        stack.discover()  # a restarted child gets a new pid
    rss: dict[str, float] = {}
    for role in ROLES:
        values = [v for v in (rss_mb(p) for p in stack.pids.get(role, [])) if v is not None]
        if values:
            rss[role] = sum(values)
    return Sample((time.monotonic() - t0) / 60, rss, probe.counted(), probe.retained(),
                  probe.redis_used_mb(), disk_mb(stack.data / "kafka" / "data"))


def _fmt_int(v: int | None) -> str:
    return "–" if v is None else f"{v:,}"


def report(samples: list[Sample], *, broker: str, rate: float, minutes: float,
           warmup: float, devices: int, note: str = "") -> list[str]:
    """The Markdown report: figures per process, then every sample."""
    roles = [r for r in ROLES if any(r in s.rss for s in samples)]
    lines = [f"# Soak: `ldpstream up --broker {broker}`, {minutes:g} min at "
             f"{rate:g} reports/s per collection", ""]
    if note:
        lines += [note, ""]
    lines += [f"Resident memory (VmRSS, MB) of each process; devices = the {devices} "
              f"simulators summed. Slopes are least-squares fits in MB/min: after the "
              f"first {warmup:g} min, and over the last half of the run.", "",
              "| process | start MB | end MB | peak MB | slope after warm-up | "
              "slope last half |", "|---|---:|---:|---:|---:|---:|"]
    end = samples[-1].minute if samples else 0.0
    for role in roles:
        pts = [(s.minute, s.rss[role]) for s in samples if role in s.rss]
        warm = [(x, y) for x, y in pts if x >= warmup] or pts
        half = [(x, y) for x, y in pts if x >= end / 2] or pts
        lines.append(f"| {role} | {pts[0][1]:.1f} | {pts[-1][1]:.1f} | "
                     f"{max(y for _, y in pts):.1f} | "
                     f"{slope([x for x, _ in warm], [y for _, y in warm]):+.2f} | "
                     f"{slope([x for x, _ in half], [y for _, y in half]):+.2f} |")
    with_counts = [s for s in samples if s.counted is not None]
    if len(with_counts) >= 2:
        a, b = with_counts[0], with_counts[-1]
        per_s = (b.counted - a.counted) / max((b.minute - a.minute) * 60, 1e-9)  # type: ignore[operator]
        lines += ["", f"Counted {_fmt_int(b.counted)} reports in all, {per_s:,.0f} reports/s "
                      "over the run."]
    ret = [s.retained for s in samples if s.retained is not None]
    if ret:
        lines.append(f"Records the broker retained on the reports topic: "
                     f"{ret[0]:,} at the first sample, {ret[-1]:,} at the last, "
                     f"{max(ret):,} at most.")
    disks = [s.broker_disk_mb for s in samples if s.broker_disk_mb is not None]
    if disks:
        lines.append(f"The broker's log on disk: {disks[0]:.1f} MB at the first sample, "
                     f"{disks[-1]:.1f} MB at the last, {max(disks):.1f} MB at most.")
    disk = bool(disks)
    lines += ["", "| min | " + " | ".join(roles) + " | counted | retained | redis used MB |"
              + (" broker disk MB |" if disk else ""),
              "|---:|" + "---:|" * (len(roles) + 3 + disk)]
    for s in samples:
        cells = [f"{s.rss[r]:.1f}" if r in s.rss else "–" for r in roles]
        used = "–" if s.redis_used_mb is None else f"{s.redis_used_mb:.1f}"
        on_disk = ("" if not disk else " – |" if s.broker_disk_mb is None
                   else f" {s.broker_disk_mb:.1f} |")
        lines.append(f"| {s.minute:.1f} | " + " | ".join(cells) +
                     f" | {_fmt_int(s.counted)} | {_fmt_int(s.retained)} | {used} |" + on_disk)
    return lines


def run_soak(args: argparse.Namespace) -> int:
    """Entry point of ``ldpstream bench soak``."""
    if args.minutes <= 0 or args.interval <= 0:
        print("ldpstream bench soak: --minutes and --interval must be > 0", file=sys.stderr)
        return 2
    def interrupted(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    # nohup'ed in the background, SIGINT is ignored: SIGTERM also ends the soak cleanly
    signal.signal(signal.SIGTERM, interrupted)
    work = Path(tempfile.mkdtemp(prefix="ldpstream-soak-"))
    samples: list[Sample] = []
    stack = _start(args, work)
    probe = _Probe(stack, "ldp-reports")
    t0 = time.monotonic()
    print(f"soak: ldpstream up ({stack.broker}) on {stack.bootstrap}, {stack.redis_url}; "
          f"processes {stack.pids}; sampling every {args.interval:g} s for "
          f"{args.minutes:g} min (work dir {work})", flush=True)
    roles = ROLES
    print("  min  " + "".join(f"{r:>11}" for r in roles) + f"{'counted':>14}{'retained':>12}",
          flush=True)
    try:
        while True:
            s = _sample(stack, probe, t0)
            samples.append(s)
            print(f"{s.minute:5.1f}  " + "".join(
                f"{s.rss[r]:11.1f}" if r in s.rss else f"{'–':>11}" for r in roles)
                + f"{_fmt_int(s.counted):>14}{_fmt_int(s.retained):>12}", flush=True)
            if stack.proc.poll() is not None:
                print("soak: ldpstream up exited early", file=sys.stderr)
                break
            if s.minute >= args.minutes:
                break
            time.sleep(max(0.0, t0 + (len(samples)) * args.interval - time.monotonic()))
    except KeyboardInterrupt:
        print("soak: interrupted; reporting what was sampled", flush=True)
    finally:
        probe.close()
        out = _stop(stack)
    devices = len(stack.pids.get("devices", []))
    lines = report(samples, broker=stack.broker, rate=args.rate, minutes=round(
        samples[-1].minute if samples else 0, 1), warmup=args.warmup, devices=devices,
        note=args.note)
    print("\n".join(lines))
    out_path = Path(args.out) if args.out else ROOT / "bench" / "results" / "soak.md"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text("\n".join(lines) + "\n")
    print(f"written to {out_path}")
    if "stopped;" not in out:
        print(out[-3000:], file=sys.stderr)
    with contextlib.suppress(OSError):
        import shutil

        shutil.rmtree(work)
    return 0 if samples and stack.proc.returncode == 0 else 1


_NUMBERS = (("--minutes", 20.0, "how long to run (default {})"),
            ("--interval", 20.0, "seconds between samples (default {})"),
            ("--rate", 400.0, "reports/s per demo collection (default {}, the demo rate of up)"),
            ("--warmup", 2.0, "minutes left out of the first slope (default {})"))
"""The numeric options of ``bench soak``: flag, default, help."""


def add_bench_soak_parser(bsub: Any) -> None:
    p = bsub.add_parser("soak", help="run `ldpstream up` for N minutes, sampling every "
                                     "process's memory")
    for flag, default, text in _NUMBERS:
        p.add_argument(flag, type=float, default=default, help=text.format(f"{default:g}"))
    p.add_argument("--broker", default=None,
                   help="the broker of up (default: up's own default)")
    p.add_argument("--out", default=None, help="Markdown results file "
                                               "(default bench/results/soak.md)")
    p.add_argument("--note", default="", help="a line written under the title")
    p.add_argument("--up-arg", dest="up_args", action="append", default=[],
                   help="one more argument of `ldpstream up` (repeatable)")
    p.set_defaults(func=run_soak)
