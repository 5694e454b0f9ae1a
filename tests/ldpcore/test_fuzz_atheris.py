"""The coverage-guided fuzzer of bench/ runs in CI with a fixed seed and a bounded run count."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_atheris_finds_no_decoder_crash_in_a_bounded_seeded_run(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "fuzz_decoders.py"), "-seed=1", "-runs=40000",
         f"-artifact_prefix={tmp_path}/"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Done 40000 runs" in proc.stderr, proc.stderr[-2000:]
    assert not list(tmp_path.glob("crash-*"))
