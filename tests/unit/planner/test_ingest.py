"""Ingest's fewer encodings (horae.contracts.ingress.accepted_value): the accepted copy of a
definition keeps the record's own bytes when they are wire Avro under the current writer schema
(with the ingest memo on; off: encoded afresh), and is encoded afresh from JSON or an older
writer schema — it decodes to the accepted definition either way."""

from __future__ import annotations

import io
import json
import struct
from dataclasses import replace

import fastavro

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts._reflect import to_avro
from horae.contracts.codec import SCHEMAS, decode, default_codec, encode, load_schema
from horae.contracts.jsonform import plain
from horae.contracts.memo import INGEST_MEMO
from horae.contracts.topics import Topic
from tests.unit.planner.builders import KEY_ID, SECRET, definition
from tests.unit.planner.rig import Rig

LABELS = {"zz-label": "zz-value"}


def _two_block_labels(d: ev.TriggerDefinition) -> bytes:
    """``d`` as wire Avro with its labels map written as a sized block (count -1, byte size):
    valid Avro the codec reads, but not the layout it writes."""
    data = encode(d)
    canonical = b"\x02\x10zz-label\x10zz-value\x00"  # count 1, key, value, end
    assert data.count(canonical) == 1
    item = canonical[1:-1]
    return data.replace(canonical, b"\x01" + bytes([len(item) * 2]) + item + b"\x00")


def _put_raw(rig: Rig, d: ev.TriggerDefinition, value: bytes) -> None:
    key = ev.trigger_key(d.tenant, d.trigger_id).encode()
    rig.log.produce(rig.name(Topic.DEFINITIONS), key, value)


def _accepted(rig: Rig) -> list[bytes]:
    return [v for r in rig.log.records(rig.name(Topic.ACCEPTED)) if (v := r.value()) is not None]


def test_the_accepted_copy_keeps_current_wire_bytes_while_the_memo_is_on(rig: Rig) -> None:
    d = _labelled("kept")
    raw = _two_block_labels(d)
    assert raw != encode(d) and decode(raw, ev.TriggerDefinition) == d
    _put_raw(rig, d, raw)
    rig.step()
    (copy,) = _accepted(rig)
    assert copy == (raw if INGEST_MEMO.enabled else encode(d))
    assert decode(copy, ev.TriggerDefinition) == d


def test_json_and_older_writer_schemas_are_encoded_afresh(rig: Rig) -> None:
    json_form = _labelled("from-json")
    _put_raw(rig, json_form, json.dumps(plain(to_avro(json_form))).encode())
    older = _labelled("from-v1")
    v1 = fastavro.parse_schema(load_schema(SCHEMAS / "released/v1/TriggerDefinition.avsc"))
    body = io.BytesIO()
    fastavro.schemaless_writer(body, v1, to_avro(older))
    _put_raw(rig, older, struct.pack(">bI", 0, 1) + body.getvalue())
    rig.step()
    assert rig.quarantined() == []
    copies = _accepted(rig)
    assert copies == [encode(json_form), encode(older)]
    assert all(c[:5] == default_codec().header(ev.TriggerDefinition) for c in copies)


def _labelled(trigger_id: str) -> ev.TriggerDefinition:
    d = replace(definition(trigger_id), labels=LABELS, signature=None)
    return signing.sign(d, KEY_ID, SECRET)
