from __future__ import annotations

from pathlib import Path

import pytest

from ldpstream.dev.generated import write_or_check


def test_check_names_the_stale_and_missing_files_and_the_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    same, stale, missing = tmp_path / "same", tmp_path / "stale", tmp_path / "new" / "missing"
    same.write_text("a")
    stale.write_text("old")
    files = {same: "a", stale: "new", missing: "m"}
    assert write_or_check(files, check=True, command="python gen.py") == 1
    err = capsys.readouterr().err
    assert str(stale) in err and str(missing) in err and str(same) not in err
    assert "run python gen.py" in err
    assert stale.read_text() == "old" and not missing.exists()  # a check writes nothing


def test_write_rewrites_every_file_then_the_check_passes(tmp_path: Path) -> None:
    files = {tmp_path / "stale": "new", tmp_path / "new" / "missing": "m"}
    (tmp_path / "stale").write_text("old")
    assert write_or_check(files, check=False, command="x") == 0
    assert [p.read_text() for p in files] == ["new", "m"]
    assert write_or_check(files, check=True, command="x") == 0
