"""No arrow runs back up: every import inside ``horae`` goes to its own layer or one below, and no
modules import each other in a circle.

The layers (docs/architecture.md), lowest first: the time core; the wire contracts and the ports,
with the pure values the ports carry; the one settings object; the adapters (Kafka, PostgreSQL,
the outbound HTTP edge, the projector, the local stack, the in-memory twins); the planner and
dispatcher processes and the tenant client; the HTTP API with its console; the command line.
Every import counts, wherever it stands (in a function, under ``TYPE_CHECKING``): each is an
arrow a reader follows. The imports are read with :mod:`ast`, nothing is imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import horae

ROOT = Path(horae.__file__).parent

#: module prefix -> layer (the longest prefix that matches a module gives its layer)
LAYERS: Mapping[str, int] = {
    "horae": 0,  # the empty package
    "horae.domain": 0,
    "horae.paths": 0,
    "horae.failpoints": 0,
    "horae.ports": 1,
    "horae.contracts": 1,
    "horae.delivery": 1,  # the Deliverer port, its table and one pure module per target kind
    "horae.outbound.results": 1,  # AttemptResult, the HttpSender port's value
    "horae.projections.rows": 1,  # Batch and ApplyResult, the ReadModelStore port's values
    "horae.settings": 2,
    "horae.kafka": 3,
    "horae.database": 3,
    "horae.outbound": 3,
    "horae.projections": 3,
    "horae.devstack": 3,
    "horae.dr": 3,  # the DR regions, MirrorMaker 2 and the promotion (beside the local stack)
    "horae.testing": 3,
    "horae.streams": 4,
    "horae.client": 4,
    "horae.api": 5,
    "horae.console": 5,
    "horae.cli": 6,
}
NAMES = ("time core", "contracts and ports", "settings", "adapters", "processes", "API", "CLI")

#: upward imports that are known and waiting, (importer or its package, imported) with what
#: removes it; the test fails when one of them is gone (delete its line) as well as when a new
#: one appears
PENDING: Mapping[tuple[str, str], str] = {}


def modules() -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = ("horae", *path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, source: str, known: Iterable[str]) -> Iterator[str]:
    """The ``horae`` modules ``source`` (module ``name``) imports, anywhere in it: ``from a
    import b`` is an arrow to ``a.b`` when that is a module, else to ``a``."""
    known = set(known)
    package = name if (ROOT / Path(*name.split(".")[1:]) / "__init__.py").exists() else ""
    here = (package or name.rpartition(".")[0]).split(".")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here[: len(here) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target not in known and "." in target:
                target = target.rpartition(".")[0]
            if target in known and target != name:
                yield target


def layer(module: str) -> int:
    prefixes = [p for p in LAYERS if module == p or module.startswith(p + ".")]
    assert prefixes, f"{module} has no layer: add it to LAYERS"
    return LAYERS[max(prefixes, key=len)]


def graph() -> dict[str, set[str]]:
    found = modules()
    return {
        name: set(imports(name, path.read_text(encoding="utf-8"), found))
        for name, path in found.items()
    }


def upward(edges: Mapping[str, Iterable[str]]) -> dict[tuple[str, str], str]:
    """Each import of a module from a higher layer, with the two layers named."""
    return {
        (a, b): f"{NAMES[layer(a)]} -> {NAMES[layer(b)]}"
        for a, targets in edges.items()
        for b in targets
        if layer(b) > layer(a)
    }


def circles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The modules that import each other, directly or around (strongly connected, Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_layer() -> None:
    for name in modules():
        layer(name)


def test_no_import_runs_up_the_layers() -> None:
    found = upward(graph())
    waiting = {k: [f for f in found if _under(f[0], k[0]) and f[1] == k[1]] for k in PENDING}
    known = {f for fs in waiting.values() for f in fs}
    assert {k: v for k, v in found.items() if k not in known} == {}
    assert [k for k, fs in waiting.items() if not fs] == [], "fixed: delete it from PENDING"


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_no_modules_import_each_other() -> None:
    assert circles(graph()) == []


def test_the_checks_see_what_they_refuse() -> None:
    """On a made-up tree: a contract importing the CLI, a port importing an adapter, and two
    CLI modules importing each other are found; the same arrows downwards are not."""
    edges = {
        "horae.contracts.events": {"horae.cli.main", "horae.domain.cron"},
        "horae.ports": {"horae.projections.store", "horae.projections.rows"},
        "horae.cli.triggers": {"horae.cli.apply"},
        "horae.cli.apply": {"horae.cli.triggers", "horae.api.client"},
    }
    assert set(upward(edges)) == {
        ("horae.contracts.events", "horae.cli.main"),
        ("horae.ports", "horae.projections.store"),
    }
    assert circles(edges) == [["horae.cli.apply", "horae.cli.triggers"]]
    source = "from horae.cli import triggers as cli\nfrom . import common\nimport horae.ports\n"
    known = {"horae.cli.triggers", "horae.cli.common", "horae.ports", "horae.cli"}
    assert sorted(imports("horae.cli.apply", source, known)) == [
        "horae.cli.common",
        "horae.cli.triggers",
        "horae.ports",
    ]
