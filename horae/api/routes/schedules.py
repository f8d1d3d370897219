"""A tenant's triggers: create (``POST``, 201 with ``Location`` and ``ETag``), list (keyset
pages, label and state filters), show, amend (``PUT`` with ``If-Match``), delete."""

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from starlette.responses import JSONResponse, Response

from horae.api.dependencies import (
    REQUEST_VALUE,
    Author,
    Cursor,
    Limit,
    Reader,
    ServiceDep,
    TriggerId,
    body_of,
)
from horae.api.ports import SHOWN_STATES
from horae.api.routes.common import json_body, ok, ref
from horae.api.service import etag

router = APIRouter(tags=["schedules"])

TRIGGER_PAGE = {
    "type": "object",
    "required": ["items", "next_cursor"],
    "properties": {
        "items": {"type": "array", "items": ref("TriggerOut")},
        "next_cursor": {"type": ["string", "null"]},
    },
}
Label = Annotated[
    str | None,
    Query(
        pattern=r"^[^:\x00-\x1f\x7f-\x9f]+:[^\x00-\x1f\x7f-\x9f]*$",
        max_length=REQUEST_VALUE.max_len,
        description="key:value",
    ),
]
State = Annotated[str | None, Query(pattern=f"^({'|'.join(SHOWN_STATES)})$")]
IfMatch = Annotated[str | None, Header()]


@router.post(
    "/v1/schedules",
    status_code=201,
    openapi_extra=json_body("TriggerIn"),
    responses=ok(201, ref("TriggerOut"), "Created"),
)
async def create(request: Request, who: Author, service: ServiceDep) -> Response:
    stored = await service.create(who, await body_of(request))
    headers = {**etag(stored), "Location": f"/v1/schedules/{stored.definition.trigger_id}"}
    return JSONResponse(service.out(stored), status_code=201, headers=headers)


@router.get("/v1/schedules", responses=ok(200, TRIGGER_PAGE))
def list_schedules(
    who: Reader,
    service: ServiceDep,
    cursor: Cursor = None,
    limit: Limit = 100,
    label: Label = None,
    state: State = None,
) -> Response:
    text = service.listing(who.tenant, cursor=cursor, limit=limit, label=label, state=state)
    return Response(text.encode(), media_type="application/json")


@router.get("/v1/schedules/{trigger_id}", responses=ok(200, ref("TriggerOut")))
def get_schedule(trigger_id: TriggerId, who: Reader, service: ServiceDep) -> Response:
    held = service.found(who.tenant, trigger_id)
    return JSONResponse(service.shown(held), headers=etag(held))


@router.put(
    "/v1/schedules/{trigger_id}",
    openapi_extra=json_body("TriggerIn"),
    responses=ok(200, ref("TriggerOut")),
)
async def amend(
    request: Request,
    trigger_id: TriggerId,
    who: Author,
    service: ServiceDep,
    if_match: IfMatch = None,
) -> Response:
    body = await body_of(request)
    stored = await service.amend(who, trigger_id, body, if_match)
    return JSONResponse(service.out(stored), headers=etag(stored))


@router.delete(
    "/v1/schedules/{trigger_id}",
    status_code=204,
    response_class=Response,
    responses={204: {"description": "Deleted"}},
)
async def delete(
    trigger_id: TriggerId, who: Author, service: ServiceDep, if_match: IfMatch = None
) -> Response:
    await service.delete(who, trigger_id, if_match)
    return Response(status_code=204)
