"""Named SQL files of the projections (``horae/projections/sql``), read once and cached.

Every file is written unqualified and runs with ``search_path`` set to the target schema.
"""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def sql(name: str) -> str:
    """The text of ``sql/<name>.sql`` (``name`` may contain ``/``, e.g. ``merge/fires``)."""
    path = resources.files("horae.projections").joinpath("sql", *f"{name}.sql".split("/"))
    return path.read_text(encoding="utf-8")


def migration_names() -> list[str]:
    """Migration file stems in the order they apply (``0001_initial``, ``0002_...``)."""
    folder = resources.files("horae.projections").joinpath("sql", "migrations")
    return sorted(p.name.removesuffix(".sql") for p in folder.iterdir() if p.name.endswith(".sql"))
