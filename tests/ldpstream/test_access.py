"""ldpstream.access: read tokens stored as hashes, their scopes, and the file re-read on change.

The API enforcing them over HTTP is in tests/query_api/test_access.py."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from ldpcore import ParameterError
from ldpstream.access import (
    TokenFile,
    TokenScope,
    add_read_token_parser,
    new_token,
    parse_token_file,
    split_private,
    token_hash,
)
from ldpstream.settings import ConfigError

H1, H2 = token_hash("one"), token_hash("two")


def test_scopes_read_public_collections_and_what_they_name() -> None:
    assert TokenScope().may_read("a", private=False)
    assert not TokenScope().may_read("a", private=True)
    assert TokenScope(frozenset({"a"})).may_read("a", private=True)
    assert TokenScope(everything=True).may_read("z", private=True)
    assert TokenScope(frozenset({"b", "a"})).describe() == "a,b"


def test_tokens_are_fresh_and_stored_as_their_sha256() -> None:
    t = new_token()
    assert len(t) >= 43 and t != new_token()
    assert len(token_hash(t)) == 64 and token_hash(t) != t


def test_a_token_file_maps_hashes_to_scopes() -> None:
    text = f"# readers\n{H1}\n{H2.upper()} a,b  # two private ones\n{token_hash('x')} *\n"
    out = parse_token_file(text, "f")
    assert out[H1] == TokenScope() and out[H2].collections == {"a", "b"}
    assert out[token_hash("x")].everything


@pytest.mark.parametrize(("text", "match"), [
    ("hunter2", "is not a SHA-256 hash"),
    (f"{H1} a b", "expected 'HASH"),
    (f"{H1} a,,b/", "scope"),
    (f"{H1}\n{H1}", "listed twice"),
])
def test_a_bad_line_names_the_source_and_the_line(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=f"LDP_READ_TOKENS line .*{match}"):
        parse_token_file(text, "LDP_READ_TOKENS")


def test_the_file_is_re_read_on_change_and_a_bad_edit_keeps_the_old_tokens(
        tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"{H1}\n")
    now = [0.0]
    tf = TokenFile(str(path), recheck=1.0, clock=lambda: now[0])
    assert tf.lookup("one") == TokenScope() and tf.lookup("two") is None
    path.write_text(f"{H2} a\n")
    os.utime(path, ns=(1, 1))  # a different mtime even within the clock's resolution
    assert tf.lookup("two") is None  # not re-checked before `recheck` seconds
    now[0] = 2.0
    assert tf.lookup("two") == TokenScope(frozenset({"a"})) and tf.lookup("one") is None
    path.write_text("garbage\n")
    now[0] = 4.0
    assert tf.lookup("two") is not None  # kept
    with pytest.raises(ConfigError, match="cannot read the token file"):
        TokenFile(str(tmp_path / "missing"))


def test_private_is_split_off_the_declaration() -> None:
    assert split_private({"id": "a", "private": False}) == ({"id": "a"}, False)
    assert split_private("x") == ("x", None)
    with pytest.raises(ParameterError, match="private must be true or false"):
        split_private({"id": "a", "private": "yes"})


def test_read_token_prints_a_token_once_and_the_line_of_its_hash(
        capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_read_token_parser(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["read-token", "--collections", "a,b"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    token = out.split("token: ")[1].split()[0]
    assert f"line:  {token_hash(token)} a,b" in out
    args = parser.parse_args(["read-token", "--hash", "one"])
    args.func(args)
    assert capsys.readouterr().out.startswith(f"line:  {H1}")
