"""The one parser of collections files (YAML or JSON), for every service and the CLI.

A file holds one spec, a list of specs, or ``{"collections": [spec, ...]}``; each spec
is validated by :meth:`ldpcore.collection.CollectionSpec.from_dict`.

>>> import json, tempfile
>>> spec = {"id": "os", "oracle": {"mechanism": "grr", "epsilon": 1.0},
...         "domain": {"kind": "categories", "labels": ["linux", "mac"]}}
>>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
...     json.dump({"collections": [spec]}, f)
>>> [s.id for s in read_collections_file(f.name)]
['os']
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ldpcore import ParameterError
from ldpcore.collection import CollectionSpec, load_collections

__all__ = ["read_collections_file", "select_collection"]


def read_collections_file(path: str | Path) -> list[CollectionSpec]:
    """Every collection declared in ``path``; raises ParameterError naming what is wrong."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ParameterError(f"cannot read collections file {str(p)!r}: {exc}") from None
    raw: Any
    try:
        if p.suffix in (".yaml", ".yml"):
            import yaml

            raw = yaml.safe_load(text)
        else:
            raw = json.loads(text)
    except Exception as exc:  # yaml.YAMLError, json.JSONDecodeError, RecursionError …
        raise ParameterError(f"collections file {str(p)!r} is not valid "
                             f"{'YAML' if p.suffix in ('.yaml', '.yml') else 'JSON'}: "
                             f"{exc}") from None
    if isinstance(raw, dict) and "id" in raw:
        return [CollectionSpec.from_dict(raw)]
    return load_collections(raw)


def select_collection(specs: list[CollectionSpec], collection: str | None,
                      source: str = "the file") -> CollectionSpec:
    """The one spec named ``collection`` (or the only one); ParameterError otherwise."""
    if collection is None:
        if len(specs) != 1:
            raise ParameterError(f"{source} declares {len(specs)} collections; name one of "
                                 f"{[s.id for s in specs]}")
        return specs[0]
    for s in specs:
        if s.id == collection:
            return s
    raise ParameterError(f"{source} has no collection {collection!r}; it declares "
                         f"{[s.id for s in specs]}")
