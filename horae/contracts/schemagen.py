"""Regenerate ``horae/contracts/schemas/<Name>.avsc`` from the event dataclasses (the mirror test
then passes). A developer tool: it writes into the package's folder, i.e. the checkout of an
editable install.

    python -m horae.contracts.schemagen           # rewrite the current schemas
    python -m horae.contracts.schemagen --check   # exit 1 if a file differs

Released versions (``schemas/released/``) and ``catalogue.json`` are never touched: releasing is
a deliberate step (see ``docs/contracts.md``).
"""

from __future__ import annotations

import json
import sys
from importlib.resources import as_file
from typing import Any

from horae.contracts._reflect import schema_of
from horae.contracts.codec import SCHEMAS
from horae.contracts.events import EVENT_TYPES


def render(event_type: type) -> str:
    implied = schema_of(event_type)
    doc = " ".join((event_type.__doc__ or "").split("\n\n")[0].split())
    schema: dict[str, Any] = {
        "type": "record",
        "name": implied["name"],
        "namespace": implied["namespace"],
        "doc": doc,
        "fields": implied["fields"],
    }
    return json.dumps(schema, indent=2) + "\n"


def main(argv: list[str]) -> int:
    stale = []
    with as_file(SCHEMAS) as schemas_dir:
        for t in EVENT_TYPES:
            path = schemas_dir / f"{t.__name__}.avsc"
            text = render(t)
            if not path.exists() or path.read_text() != text:
                stale.append(path.name)
                if "--check" not in argv:
                    path.write_text(text)
    print(("stale: " if "--check" in argv else "written: ") + (", ".join(stale) or "none"))
    return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
