"""Make kubernetes-validate's Kubernetes JSON schemas usable by kubeconform, offline.

kubernetes-validate (PyPI) ships one schema per kind and version, whose ``$ref`` point into a
shared ``/api/_definitions.json#/$defs/...`` (and into ``#/$defs/...``); kubeconform cannot
resolve those and reports "could not find schema". This writes each schema as a standalone file:
the closure of the definitions it references copied into its own ``$defs``, every ``$ref``
rewritten to ``#/$defs/<name>``. Output: ``OUT/v<version>-standalone[-strict]/<kind>-<group>-
<version>.json``, the layout kubeconform's ``-schema-location`` template
``OUT/{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}/{{ .ResourceKind }}
{{ .KindSuffix }}.json`` expects.

    python deploy/tools/standalone_schemas.py OUT 1.37.0
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate

PREFIXES = ("/api/_definitions.json#/$defs/", "_definitions.json#/$defs/", "#/$defs/")


def _name(ref: str) -> str | None:
    for prefix in PREFIXES:
        if ref.startswith(prefix):
            return ref[len(prefix) :]
    return None


def _rewrite(node: Any, seen: set[str]) -> Any:
    """``node`` with its refs rewritten; the definitions it names are added to ``seen``."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and (name := _name(value)) is not None:
                seen.add(name)
                out[key] = f"#/$defs/{name}"
            else:
                out[key] = _rewrite(value, seen)
        return out
    if isinstance(node, list):
        return [_rewrite(item, seen) for item in node]
    return node


def convert(source: Path, target: Path) -> int:
    definitions: dict[str, Any] = json.loads((source / "_definitions.json").read_text())["$defs"]
    target.mkdir(parents=True, exist_ok=True)
    count = 0
    for path in sorted(source.glob("*.json")):
        if path.name in ("_definitions.json", "all.json"):
            continue
        seen: set[str] = set()
        schema = _rewrite(json.loads(path.read_text()), seen)
        own: dict[str, Any] = dict(schema.pop("$defs", {}))
        todo = sorted(seen - set(own))
        while todo:
            name = todo.pop()
            if name in own or name not in definitions:
                continue
            more: set[str] = set()
            own[name] = _rewrite(definitions[name], more)
            todo.extend(sorted(more - set(own)))
        if own:
            schema["$defs"] = own
        (target / path.name).write_text(json.dumps(schema, separators=(",", ":")))
        count += 1
    return count


def main() -> int:
    out, version = Path(sys.argv[1]), sys.argv[2].removeprefix("v")
    shipped = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    for suffix in ("", "-strict"):
        source = shipped / f"v{version}-local{suffix}"
        if not source.is_dir():
            print(f"kubernetes-validate ships no schemas for {version}", file=sys.stderr)
            return 1
        n = convert(source, out / f"v{version}-standalone{suffix}")
        print(f"{n} standalone schemas in {out / f'v{version}-standalone{suffix}'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
