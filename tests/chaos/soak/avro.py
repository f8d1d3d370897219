"""The checker's own Avro reader: the released ``.avsc`` files and ``catalogue.json`` parsed with
fastavro, the wire header (byte 0, 4-byte big-endian schema id) read here. Imports nothing of
``horae``: it reads the schema files of the checkout, not the product's codec."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path
from typing import Any

from fastavro import parse_schema, schemaless_reader

SCHEMAS = Path(__file__).resolve().parents[3] / "horae" / "contracts" / "schemas"


class WireError(ValueError):
    """Bytes that are not a framed record of a known schema."""


class WireReader:
    """Decodes framed records into plain dicts (instants as aware datetimes), by schema id."""

    def __init__(self, root: Path = SCHEMAS) -> None:
        catalogue = json.loads((root / "catalogue.json").read_text())
        self.names: dict[int, str] = {}
        self._schemas: dict[int, Any] = {}
        for entry in catalogue["schemas"]:
            raw = json.loads((root / entry["path"]).read_text())
            self._schemas[int(entry["id"])] = parse_schema(raw)
            self.names[int(entry["id"])] = str(entry["name"]).rsplit(".", 1)[-1]

    def decode(self, data: bytes) -> tuple[str, dict[str, Any]]:
        """(record name, fields) of one framed record."""
        if len(data) < 5 or data[0] != 0:
            raise WireError(f"no wire header ({data[:5]!r})")
        (schema_id,) = struct.unpack(">I", data[1:5])
        schema = self._schemas.get(schema_id)
        if schema is None:
            raise WireError(f"unknown schema id {schema_id}")
        record = schemaless_reader(io.BytesIO(data[5:]), schema, None)
        assert isinstance(record, dict)
        return self.names[schema_id], record
