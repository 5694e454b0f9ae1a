"""The one parser of collections files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ldpcore import ParameterError
from ldpstream.collections_file import read_collections_file, select_collection

SPEC = {"id": "os", "oracle": {"mechanism": "grr", "epsilon": 1.0},
        "domain": {"kind": "categories", "labels": ["linux", "mac"]}}


@pytest.mark.parametrize("shape", ["one", "list", "object"])
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_every_shape_and_format_reads_the_same_specs(tmp_path: Path, shape: str,
                                                     suffix: str) -> None:
    import yaml

    raw = {"one": SPEC, "list": [SPEC], "object": {"collections": [SPEC]}}[shape]
    path = tmp_path / f"c{suffix}"
    path.write_text(json.dumps(raw) if suffix == ".json" else yaml.safe_dump(raw))
    (spec,) = read_collections_file(path)
    assert spec.id == "os" and spec.domain.size == 2


@pytest.mark.parametrize("text,match", [("{", "not valid JSON"), ("[1]", "must be an object"),
                                        ('{"collections": 3}', "collections")])
def test_a_bad_file_is_a_parameter_error_naming_it(tmp_path: Path, text: str,
                                                   match: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ParameterError, match=match):
        read_collections_file(path)


def test_a_missing_file_is_a_parameter_error(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="cannot read"):
        read_collections_file(tmp_path / "nope.yaml")


def test_select_names_what_the_file_declares(tmp_path: Path) -> None:
    from ldpcore.collection import CollectionSpec

    specs = [CollectionSpec.from_dict(SPEC), CollectionSpec.from_dict({**SPEC, "id": "b"})]
    assert select_collection(specs, "b").id == "b"
    with pytest.raises(ParameterError, match="name one of"):
        select_collection(specs, None)
    with pytest.raises(ParameterError, match="no collection 'z'"):
        select_collection(specs, "z")
