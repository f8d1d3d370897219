"""Write the Helm chart's copy of the topic catalogue and the process roles' ACLs, from the code
that is their source of truth (horae/contracts/topics.py through horae.kafka.admin.Plan,
horae/kafka/acls.py), so the chart's optional Strimzi KafkaTopic and KafkaUser resources say
exactly what ``horae topics apply`` does. Names carry the placeholder ``@PREFIX@`` where the
deployment's topic prefix goes; tenants' events topics and ACLs are not included (``horae
tenants add`` makes them).

    python deploy/tools/catalogue.py            # rewrite deploy/helm/horae/files/catalogue.json
    python deploy/tools/catalogue.py --check    # exit 1 if the file differs (the static tests)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from horae.contracts.topics import desired_config
from horae.kafka.acls import ROLES, role_bindings
from horae.kafka.admin import Plan

PREFIX = "@PREFIX@"
TARGET = Path(__file__).resolve().parents[1] / "helm" / "horae" / "files" / "catalogue.json"


def _name(value: Any) -> str:
    return str(getattr(value, "name", value)).lower()


def catalogue() -> dict[str, Any]:
    plan = Plan(PREFIX, 0, 3, ())
    topics = []
    for name, spec in plan.topics():
        config = desired_config(spec, 3)
        topics.append(
            {
                "name": name,
                "partitions": spec.partitions,  # null: the chart's kafka.partitions
                "config": dict(sorted(config.items())),
            }
        )
    acls: dict[str, list[dict[str, str]]] = {}
    for role in ROLES:
        rows = []
        for b in role_bindings(role, PREFIX):
            rows.append(
                {
                    "type": _name(b.restype),
                    "name": b.name,
                    "patternType": _name(b.resource_pattern_type),
                    "operation": _name(b.operation),
                }
            )
        acls[role] = sorted(rows, key=lambda r: (r["type"], r["name"], r["operation"]))
    return {"prefix_placeholder": PREFIX, "topics": topics, "acls": acls}


def main() -> int:
    text = json.dumps(catalogue(), indent=1) + "\n"
    if "--check" in sys.argv:
        if not TARGET.exists() or TARGET.read_text() != text:
            print(f"{TARGET} is stale: run python deploy/tools/catalogue.py", file=sys.stderr)
            return 1
        return 0
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
