"""The averaging attack over app reloads, before and after derived permanent answers (#25).

A user's app is reloaded R times and reports its (unchanged) true value at each start; an
observer takes the most frequent report of each user.  With SDK 0.1's default (no memo
persisted) every start draws a new "permanent" answer and the mode converges to the true
value; with the SDKs' default store the permanent answer is derived from the device secret,
the same at every start, so the mode is the true value only with the mechanism's own p.

For each SDK (Python in process; TypeScript and Java through their reload tools) and each
setting — SDK 0.1 as shipped (the code of another checkout, ``--old``), the new default
store (a file per user) and the new SDK with storage opted out (a ``MemoryStore`` per start)
— prints how many of U users have the true value as their most frequent report, and how many
sent one answer over all reloads.

    .venv/bin/python bench/sdk_reloads.py [--users 1000] [--reloads 100] [--old /work/main]

GRR, ε = 1, d = 8: a single report is the true value w.p. p = e/(e+7) = 0.280.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ldpcore.collection import CollectionSpec  # noqa: E402

LABELS = [f"v{i}" for i in range(8)]
SPEC = CollectionSpec.from_dict({"id": "reloads", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                 "domain": {"kind": "categories", "labels": LABELS}})


def _score(truth: list[str], answers: list[list[int]]) -> tuple[int, int]:
    """(users whose most frequent report is their true value, users with a single answer).
    Ties are broken against the attacker (a tie with the truth is not a hit)."""
    hits = single = 0
    for t, ans in zip(truth, answers, strict=True):
        counts = Counter(ans).most_common()
        top = [v for v, c in counts if c == counts[0][1]]
        hits += int(top == [LABELS.index(t)])
        single += int(len(counts) == 1)
    return hits, single


def _python_new(truth: list[str], reloads: int, mode: str, tmp: Path) -> list[list[int]]:
    from producer.sdk import Device
    from producer.store import FileStore, MemoryStore

    out = []
    for u, t in enumerate(truth):
        ans = []
        for _ in range(reloads):
            store = FileStore(tmp / f"py{u}.json") if mode == "file" else MemoryStore()
            ans.append(int(Device(SPEC, store=store).report(t).columns["y"][0]))
        out.append(ans)
    return out


def _python_old(truth: list[str], reloads: int, old: Path) -> list[list[int]]:
    spec = importlib.util.spec_from_file_location("old_sdk", old / "producer" / "sdk.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return [[int(mod.Device(SPEC).report(t).columns["y"][0]) for _ in range(reloads)]
            for t in truth]


def _tool(cmd: list[str], truth: list[str], reloads: int, mode: str, tmp: Path
          ) -> list[list[int]]:
    spec_path, truth_path = tmp / "spec.json", tmp / "truth.json"
    spec_path.write_text(SPEC.to_json())
    truth_path.write_text(json.dumps(truth))
    store_dir = tmp / f"stores-{mode}-{cmd[-1].rsplit('/', 1)[-1]}"
    store_dir.mkdir(exist_ok=True)
    proc = subprocess.run([*cmd, str(spec_path), str(truth_path), str(reloads), mode,
                           str(store_dir)], capture_output=True, text=True, check=True)
    out: list[list[int]] = json.loads(proc.stdout)
    return out


_OLD_JS = """
import { readFileSync } from "node:fs";
const sdk = await import(process.argv[2]);
const spec = sdk.CollectionSpec.fromJson(JSON.parse(readFileSync(process.argv[3], "utf8")));
const truth = JSON.parse(readFileSync(process.argv[4], "utf8"));
const reloads = Number(process.argv[5]);
// SDK 0.1's default: a Device without storage at every start
process.stdout.write(JSON.stringify(truth.map((t) =>
  Array.from({ length: reloads }, () => new sdk.Device(spec).report(t).y))));
"""

_OLD_JAVA = """
import java.nio.file.*;
import java.util.*;
import org.ldpstream.sdk.*;
public class OldReloads {
  public static void main(String[] a) throws Exception {
    CollectionSpec spec = CollectionSpec.parse(new String(Files.readAllBytes(Paths.get(a[0]))));
    List<Object> truth = (List<Object>) Json.parse(new String(Files.readAllBytes(Paths.get(a[1]))));
    int reloads = Integer.parseInt(a[2]);
    StringBuilder b = new StringBuilder("[");
    for (int u = 0; u < truth.size(); u++) {
      b.append(u > 0 ? "," : "").append('[');
      for (int r = 0; r < reloads; r++) {  // SDK 0.1's default: no memo file
        b.append(r > 0 ? "," : "").append(new Device(spec).report(truth.get(u)).get("y"));
      }
      b.append(']');
    }
    System.out.println(b.append(']'));
  }
}
"""


def _old_js(truth: list[str], reloads: int, old: Path, tmp: Path) -> list[list[int]]:
    script = tmp / "old-reloads.mjs"
    script.write_text(_OLD_JS)
    (tmp / "truth.json").write_text(json.dumps(truth))
    (tmp / "spec.json").write_text(SPEC.to_json())
    index = (old / "sdks" / "js" / "dist" / "src" / "index.js").as_uri()
    proc = subprocess.run(["node", str(script), index, str(tmp / "spec.json"),
                           str(tmp / "truth.json"), str(reloads)], capture_output=True,
                          text=True, check=True)
    out: list[list[int]] = json.loads(proc.stdout)
    return out


def _old_java(truth: list[str], reloads: int, old: Path, tmp: Path) -> list[list[int]]:
    src = tmp / "OldReloads.java"
    src.write_text(_OLD_JAVA)
    classes = old / "sdks" / "java" / "target" / "classes"
    subprocess.run(["javac", "-nowarn", "-cp", str(classes), "-d", str(tmp), str(src)],
                   check=True, capture_output=True)
    proc = subprocess.run(["java", "-cp", f"{classes}:{tmp}", "OldReloads",
                           str(tmp / "spec.json"), str(tmp / "truth.json"), str(reloads)],
                          capture_output=True, text=True, check=True)
    out: list[list[int]] = json.loads(proc.stdout)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--reloads", type=int, default=100)
    ap.add_argument("--old", type=Path, default=None,
                    help="a checkout of SDK 0.1 with its SDKs built (e.g. /work/main)")
    ap.add_argument("--seed", type=int, default=25)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    truth = [LABELS[i] for i in rng.integers(0, len(LABELS), args.users)]
    js = [shutil.which("node") or "node", str(ROOT / "sdks/js/dist/bench/reloads.js")]
    java = ["java", "-cp", f"{ROOT / 'sdks/java/target/classes'}:"
            f"{ROOT / 'sdks/java/target/test-classes'}", "org.ldpstream.sdk.ReloadsTool"]
    rows: list[tuple[str, str, Any, float]] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)

        def run(sdk: str, setting: str, f: Any) -> None:
            t0 = time.perf_counter()
            answers = f()
            rows.append((sdk, setting, _score(truth, answers), time.perf_counter() - t0))
            hits, single = rows[-1][2]
            print(f"{sdk:<11} {setting:<34} truth is the mode: {hits:>5}/{args.users}   "
                  f"one answer over {args.reloads} starts: {single:>5}/{args.users}",
                  flush=True)

        if args.old is not None:
            run("Python", "SDK 0.1 default (no memo kept)",
                lambda: _python_old(truth, args.reloads, args.old))
            run("TypeScript", "SDK 0.1 default (no memo kept)",
                lambda: _old_js(truth, args.reloads, args.old, tmp))
            run("Java", "SDK 0.1 default (no memo kept)",
                lambda: _old_java(truth, args.reloads, args.old, tmp))
        for mode, setting in (("file", "default store (file per user)"),
                              ("memory", "storage opted out (MemoryStore)")):
            run("Python", setting, lambda m=mode: _python_new(truth, args.reloads, m, tmp))
            run("TypeScript", setting, lambda m=mode: _tool(js, truth, args.reloads, m, tmp))
            run("Java", setting, lambda m=mode: _tool(java, truth, args.reloads, m, tmp))
    p = np.e / (np.e + 7)
    print(f"\nGRR ε = 1, d = 8: one report is the true value w.p. p = {p:.3f} "
          f"(expected with a permanent answer: {args.users * p:.0f} ± "
          f"{np.sqrt(args.users * p * (1 - p)):.0f} users)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
