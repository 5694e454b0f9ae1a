"""The documentation a newcomer reads: a short README that speaks only of the project, links
that resolve, and a configuration reference that is what the code generates."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?\)")


def gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules["gen_docs"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def relative_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [t for t in _LINK.findall(text)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def test_configuration_reference_is_what_the_code_generates() -> None:
    page = gen_docs().configuration_page()
    assert (ROOT / "docs" / "configuration.md").read_text() == page, (
        "docs/configuration.md is out of date: run python scripts/gen_docs.py")


def test_configuration_reference_states_the_codes_defaults_and_ranges() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    from aggregator.config import WorkerSettings

    row = next(ln for ln in page.splitlines() if ln.startswith("| `LDP_FLUSH_INTERVAL_MS`"))
    assert f"`{WorkerSettings.flush_interval_ms}`" in row and "[1, 3600000]" in row
    assert "worker" in row


def test_docstring_tables_are_read_with_their_continuation_lines() -> None:
    text = """
    ======  =======  ==================
    name    default  meaning
    ======  =======  ==================
    LDP_A   1        first line
                     and its second
    LDP_B   (unset)  other
    ======  =======  ==================
    """
    assert list(gen_docs().docstring_rows(text)) == [
        ("LDP_A", "1", "first line and its second"), ("LDP_B", "(unset)", "other")]


def test_readme_fits_on_a_screen_or_two_and_keeps_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 100
    assert "bash scripts/up.sh" in text and "bash scripts/test.sh" in text
    assert "../" not in text, "README speaks only of the project's own files"
    for script in ("scripts/up.sh", "scripts/test.sh"):
        assert (ROOT / script).is_file()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_names_a_file_of_the_project(page: Path) -> None:
    # The site build (mkdocs build --strict in scripts/test.sh) also checks the anchors;
    # this is the quick check, and it keeps pages from pointing outside the repository.
    bad = []
    for link in relative_links(page):
        target = (page.parent / link.split("#", 1)[0]).resolve()
        if ROOT not in target.parents or not target.exists():
            bad.append(link)
    assert not bad, f"{page.relative_to(ROOT)} links to what the project does not hold: {bad}"


def test_a_setting_read_without_a_documented_row_stops_the_generator(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ldpstream.settings import env_int

    class FakeSettings:
        """Settings.

        =============  =======  ===========================
        variable       default  meaning
        =============  =======  ===========================
        LDP_FAKE_A     1        a
        LDP_FAKE_GONE  2        no code reads this any more
        =============  =======  ===========================
        """

        @classmethod
        def from_env(cls, env: Any) -> None:
            env_int(env, "LDP_FAKE_A", 1, 0, 9)
            env_int(env, "LDP_FAKE_NEW", 5, 0, 9)

    module = ModuleType("fake_settings")
    module.FakeSettings = FakeSettings  # type: ignore[attr-defined]
    module.__file__ = __file__
    monkeypatch.setitem(sys.modules, "fake_settings", module)
    gen = gen_docs()
    monkeypatch.setattr(gen, "SERVICES", {"fakepkg": "fake"})
    monkeypatch.setattr(gen, "settings_classes", lambda package: (
        [("fake_settings", "FakeSettings")] if package == "fakepkg" else []))
    monkeypatch.setattr(gen, "_modules", lambda package: iter(()))
    monkeypatch.setattr(gen, "_code_literals", lambda path, cls_name: [])
    with pytest.raises(SystemExit) as stop:
        gen.collect()
    assert "LDP_FAKE_NEW is read by the code but has no row" in str(stop.value)
    assert "LDP_FAKE_GONE is documented in fake_settings.FakeSettings" in str(stop.value)
    assert "LDP_FAKE_A" not in str(stop.value)


def test_a_retired_variable_the_code_only_refuses_needs_no_row(tmp_path: Path) -> None:
    # `"LDP_OLD" in env` refuses a variable that is no longer read: not a setting to document.
    from ldpstream.settings import EnvRecorder

    path = tmp_path / "example.py"
    path.write_text('class S:\n    @classmethod\n    def from_env(cls, env):\n'
                    '        if "LDP_OLD" in env:\n'
                    '            raise ValueError("LDP_OLD is gone")\n'
                    '        return env.get("LDP_NEW")\n')
    assert gen_docs()._code_literals(path, "S") == ["LDP_NEW"]
    env = EnvRecorder({"LDP_OLD": "1"})
    assert "LDP_OLD" in env and "LDP_OLD" not in env.read
