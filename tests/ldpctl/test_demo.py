"""What ``up`` and ``up --cluster`` share: the working directory, the demo collections file
and the demo devices' command line (ldpctl.demo)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ldpctl import demo


def test_a_temporary_workdir_is_removed_and_a_given_one_kept(tmp_path: Path) -> None:
    work, temporary = demo.open_workdir(None, "ldp-test-")
    assert temporary and work.is_dir()
    demo.close_workdir(work, temporary, keep=False)
    assert not work.exists()
    given, temporary = demo.open_workdir(str(tmp_path / "a" / "b"), "unused-")
    assert not temporary and given.is_dir()
    demo.close_workdir(given, temporary, keep=False)
    assert given.is_dir()  # --data-dir is the user's: never removed


def test_the_collections_file_registers_every_demo_with_the_retention(tmp_path: Path) -> None:
    demos, cfile = demo.write_demo_collections(tmp_path, 7200)
    specs = json.loads(cfile.read_text())["collections"]
    assert [s["id"] for s in specs] == [s["id"] for s, _ in demos] and len(specs) >= 4
    assert all(s["retention_seconds"] == 7200 and "fingerprint" not in s for s in specs)


def test_the_devices_post_through_the_gateway_only_when_given_one() -> None:
    argv = demo.simulate_argv("emoji", "zipf", Path("c.json"), 400.0)
    assert argv[:4] == [sys.executable, "-m", "ldpctl", "simulate"]
    assert "--gateway" not in argv and argv[argv.index("--rate") + 1] == "400.0"
    assert demo.simulate_argv("emoji", "zipf", Path("c.json"), 1.0, "http://g:1")[-2:] == [
        "--gateway", "http://g:1"]
