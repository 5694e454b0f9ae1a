"""The one parser of collections files (YAML or JSON), for every service and the CLI.

A file holds one spec, a list of specs, or ``{"collections": [spec, ...]}``; each spec
is validated by :meth:`ldpcore.collection.CollectionSpec.from_dict`.  A spec may say
``private: true`` (readable only with a read token naming it, :mod:`ldpstream.access`):
that mark is kept beside the spec, not in it.  The ``{"collections": [...]}`` form may
state the fleet policy beside them: ``budget: {epsilon_per_day: 8}`` (the per-device
daily privacy budget, :mod:`ldpcore.budget`; ``budget: null`` removes it).

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ldpcore import ParameterError
from ldpcore.budget import FleetBudget
from ldpcore.collection import CollectionSpec, load_collections

__all__ = ["CatalogueFile", "read_catalogue_file", "read_collections_file",
           "select_collection", "parse_catalogue", "register_catalogue_file"]


@dataclass(frozen=True)
class CatalogueFile:
    """What a collections file declares: the specs, their private marks, the budget."""

    specs: list[CollectionSpec]
    private: dict[str, bool] = field(default_factory=dict)
    """Collection id -> its ``private`` mark, for the specs that state one."""
    budget: FleetBudget | None = None
    """The fleet budget the file states (``FleetBudget()``: none), or None if it is silent."""


def read_collections_file(path: str | Path) -> list[CollectionSpec]:
    """Every collection declared in ``path``; raises ParameterError naming what is wrong."""
    return read_catalogue_file(path).specs


def read_catalogue_file(path: str | Path) -> CatalogueFile:
    """The collections of ``path`` with their private marks (ParameterError if malformed)."""
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
    return parse_catalogue(raw)


def parse_catalogue(raw: Any) -> CatalogueFile:
    """A parsed YAML/JSON document (one spec, a list, or ``{"collections": [...]}``).

    >>> c = parse_catalogue({"collections": [{"id": "os", "private": True,
    ...     "oracle": {"mechanism": "grr", "epsilon": 1.0},
    ...     "domain": {"kind": "categories", "labels": ["linux", "mac"]}}]})
    >>> [s.id for s in c.specs], c.private
    (['os'], {'os': True})
    >>> parse_catalogue({"budget": {"epsilon_per_day": 8}, "collections": []}).budget
    FleetBudget(epsilon_per_day=8.0, values_per_day=1)
    """
    from ldpcore.budget import check_collection

    from .access import split_private

    budget = None
    if isinstance(raw, Mapping) and "id" in raw:
        entries: Any = [raw]
    elif isinstance(raw, Mapping):
        entries = raw.get("collections")
        if "budget" in raw:
            budget = FleetBudget.from_dict(raw["budget"])
    else:
        entries = raw
    if not isinstance(entries, list):
        raise ParameterError("a collections file holds a list, or {'collections': [...]}")
    private: dict[str, bool] = {}
    plain = []
    for entry in entries:
        spec_raw, flag = split_private(entry)
        plain.append(spec_raw)
        if flag is not None and isinstance(spec_raw, Mapping):
            private[str(spec_raw.get("id"))] = flag
    specs = load_collections(plain)
    if budget is not None:
        for spec in specs:
            check_collection(spec, budget)
    return CatalogueFile(specs, private, budget)


def register_catalogue_file(redis: Any, prefix: str, path: str | Path) -> CatalogueFile:
    """Register what ``path`` declares in the Redis catalogue (sync client); idempotent.

    Every spec must fit the fleet budget (the file's, else the one in Redis;
    :class:`ldpcore.budget.BudgetError` otherwise, before anything is written); a budget
    the file states must also fit every collection already registered, and replaces the
    stored one.  Then the specs are registered (a different spec under a taken id raises
    :class:`~ldpstream.storage.CollectionConflict`) and the private marks the file states
    are applied (a spec without ``private`` keeps its current mark).
    """
    from .fleet import check_fleet, read_budget, write_budget
    from .storage import CollectionCatalogue

    cat = read_catalogue_file(path)
    catalogue = CollectionCatalogue(redis, prefix)
    if cat.budget is not None:
        check_fleet(catalogue.all().values(), cat.budget)
        write_budget(redis, cat.budget, prefix)
    else:
        check_fleet(cat.specs, read_budget(redis, prefix))
    catalogue.register_all(cat.specs)
    for cid, flag in cat.private.items():
        catalogue.mark_private(cid, flag)
    return cat


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
