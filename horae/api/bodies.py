"""The API's small JSON bodies as pydantic models: a backfill's window, a horizon, a what-if's
proposal and window, a target verification's URL, a tenant's suspension.

:func:`of` validates a body already read (``application/json``, its size, depth and text rules:
:func:`horae.api.dependencies.read`) into its model, or raises :class:`Refused` naming one field
with that field's own sentence (:class:`Says`), which the API answers 422. The field named is the
first refused one in the model's field order, so a body with several faults is refused as the
routes always refused it. A body that is not a JSON object is refused as ``<body>``, or, for a
model with one required field (``STANDS_FOR``), as that field. Fields a model does not name are
ignored. A ``reason`` that is not a string is ignored too (the act is recorded without one).

:func:`schemas` are the models' JSON Schemas, the OpenAPI document's ``components/schemas`` for
these bodies (``BackfillIn``, ``HorizonIn``, ...): the document and the check come from one
declaration. TriggerIn, the body of a definition, is not here: it is the definition's Avro form
(:mod:`horae.api.schemas`), validated by ingress (:meth:`horae.api.service.Service.parse`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
    WithJsonSchema,
)


class Refused(Exception):
    """A body refused: ``field`` and why (``message``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


@dataclass(frozen=True)
class Says:
    """The sentence a field is refused with, whatever pydantic found wrong with it."""

    message: str


def _epoch(value: Any) -> int:
    """An RFC 3339 instant (``Z`` or an offset; without one, UTC) as epoch seconds."""
    if not isinstance(value, str):
        raise ValueError("not a string")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
        return int(moment.timestamp())
    except (ValueError, OverflowError):
        raise ValueError("not an RFC 3339 instant") from None


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


#: in a field's JSON Schema, the name of a schema of the document's components (made a ``$ref``)
COMPONENT = "x-horae-component"
#: an RFC 3339 instant, as epoch seconds
Instant = Annotated[
    int,
    BeforeValidator(_epoch),
    WithJsonSchema({"type": "string", "format": "date-time"}),
    Says("expected an RFC 3339 instant"),
]
#: free text recorded with the act (ignored unless a string)
Reason = Annotated[str | None, BeforeValidator(_text_or_none)]


class Body(BaseModel):
    """A small body: unknown fields ignored, values frozen once read."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)
    #: the field a body that is not a JSON object is refused as (``None``: ``<body>``)
    STANDS_FOR: ClassVar[str | None] = None


class BackfillIn(Body):
    """A window [from, to) in the past. Without confirm the answer is the cost and a confirm
    token; with that token the backfill is requested."""

    start: Annotated[Instant, Field(alias="from")]
    end: Annotated[Instant, Field(alias="to")]
    #: the confirm token of the cost answer, checked by the service after the window's cost
    #: (a window it refuses is named first, whatever ``confirm`` holds)
    confirm: Annotated[Any, WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "null"}]})] = (
        None
    )
    reason: Reason = None


class HorizonIn(Body):
    """The trigger's new decision horizon, in seconds."""

    STANDS_FOR: ClassVar[str | None] = "horizon_s"
    horizon_s: Annotated[
        int, Field(strict=True, ge=0), Says("expected a non-negative integer (seconds)")
    ]


class WhatIfIn(Body):
    """A proposed TriggerIn and the window [from, to) to compare it with the current one over."""

    #: a TriggerIn, validated as a definition by the service (absent: refused as ``<body>``)
    proposed: Annotated[Any, WithJsonSchema({COMPONENT: "TriggerIn"})] = None
    start: Annotated[Instant, Field(alias="from")]
    end: Annotated[Instant, Field(alias="to")]


class VerificationIn(Body):
    """The webhook URL whose host the tenant proves it owns."""

    STANDS_FOR: ClassVar[str | None] = "url"
    url: Annotated[StrictStr, Says("expected the webhook URL")]


class SuspensionIn(Body):
    """Suspend (true) or resume (false) every trigger of a tenant."""

    STANDS_FOR: ClassVar[str | None] = "suspended"
    suspended: Annotated[StrictBool, Says("expected true or false")]
    reason: Reason = None


#: a request id: what makes a repeated act a no-op (1-64 of A-Z a-z 0-9 . _ -)
RequestId = Annotated[
    Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")] | None,
    Says("expected 1-64 characters of A-Z a-z 0-9 . _ -"),
]


class GroupIn(Body):
    """A group act on the triggers a label selector names (``horae.domain.selector``): with
    ``dry_run`` the count and ids only; else the act, once per ``request_id``. ``policies``: the
    fields of ``policies`` to set (``/v1/groups/policies`` only)."""

    STANDS_FOR: ClassVar[str | None] = "selector"
    selector: Annotated[StrictStr, Says("expected a label selector, e.g. env=prod,team=x")]
    request_id: RequestId = None
    dry_run: Annotated[StrictBool, Says("expected true or false")] = False
    policies: Annotated[dict[str, Any] | None, Says("expected an object of policies fields")] = None
    reason: Reason = None


class RedriveIn(Body):
    """Dead letters to send again: by id (``ids``) or by the list's filters, dry run first."""

    ids: Annotated[
        Annotated[list[StrictStr], Field(max_length=1000)] | None,
        Says("expected a list of at most 1000 dead-letter ids"),
    ] = None
    trigger_id: Annotated[StrictStr | None, Says("expected a trigger id")] = None
    selector: Annotated[StrictStr | None, Says("expected a label selector")] = None
    since: Annotated[Instant | None, Field(alias="from")] = None
    until: Annotated[Instant | None, Field(alias="to")] = None
    cause: Annotated[StrictStr | None, Says("expected a cause's text")] = None
    state: Annotated[StrictStr | None, Says("expected dead or redriven")] = None
    request_id: RequestId = None
    dry_run: Annotated[StrictBool, Says("expected true or false")] = False


#: every small body, by its name in the OpenAPI document
BODIES: tuple[type[Body], ...] = (
    BackfillIn, HorizonIn, WhatIfIn, VerificationIn, SuspensionIn, GroupIn, RedriveIn,
)  # fmt: skip
#: what each model's JSON Schema must list as required beyond its pydantic-required fields
_REQUIRED: dict[type[Body], tuple[str, ...]] = {WhatIfIn: ("proposed",)}

B = TypeVar("B", bound=Body)


def _sentence(model: type[Body], name: str) -> str | None:
    for field_name, info in model.model_fields.items():
        if name in (field_name, info.alias):
            return next((m.message for m in info.metadata if isinstance(m, Says)), None)
    return None


def of(model: type[B], raw: Any) -> B:
    """``raw`` (a decoded JSON body) as ``model``; :class:`Refused` naming the first field it
    refuses."""
    if not isinstance(raw, dict):
        if model.STANDS_FOR is None:
            raise Refused("<body>", "expected a JSON object")
        raw = {}
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else "<body>"
        raise Refused(name, _sentence(model, name) or str(first["msg"])) from None


def _refs(schema: Any) -> Any:
    if isinstance(schema, dict):
        if COMPONENT in schema:
            return {"$ref": f"#/components/schemas/{schema[COMPONENT]}"}
        return {k: _refs(v) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_refs(v) for v in schema]
    return schema


def schemas() -> dict[str, Any]:
    """``components/schemas`` of the small bodies, by model name."""
    out: dict[str, Any] = {}
    for model in BODIES:
        schema = _refs(model.model_json_schema(by_alias=True))
        for field in schema["properties"].values():
            field.pop("title", None)  # the property's name says it
        required = {*schema.get("required", ()), *_REQUIRED.get(model, ())}
        schema["required"] = [name for name in schema["properties"] if name in required]
        out[model.__name__] = schema
    return out
