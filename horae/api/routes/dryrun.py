"""Instants without acting: a trigger's next ``n`` (local time, offset, DST note, jitter), the
next ``n`` of a TriggerIn body before it is created, and what-if: a proposed change's instants
against the current ones over a window."""

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response

from horae.api.bodies import WhatIfIn
from horae.api.dependencies import N, Reader, ServiceDep, TriggerId, body_of, read
from horae.api.routes.common import OCCURRENCES, json_body, ok

router = APIRouter(tags=["dry-run"])

WHAT_IF_OUT = {
    "type": "object",
    "required": ["current", "proposed", "added", "removed"],
    "properties": {
        k: {"type": "array", "items": {"type": "string"}}
        for k in ("current", "proposed", "added", "removed")
    },
}


@router.get("/v1/schedules/{trigger_id}/next", responses=ok(200, OCCURRENCES))
def next_of(trigger_id: TriggerId, who: Reader, service: ServiceDep, n: N = 10) -> Response:
    return JSONResponse(service.next_of(who.tenant, trigger_id, n))


@router.post("/v1/dry-run", openapi_extra=json_body("TriggerIn"), responses=ok(200, OCCURRENCES))
async def dry_run(request: Request, who: Reader, service: ServiceDep, n: N = 10) -> Response:
    body = await body_of(request)
    return JSONResponse(service.dry_run(who, body, n))


@router.post(
    "/v1/schedules/{trigger_id}/what-if",
    openapi_extra=json_body("WhatIfIn"),
    responses=ok(200, WHAT_IF_OUT),
)
async def what_if(
    request: Request, trigger_id: TriggerId, who: Reader, service: ServiceDep
) -> Response:
    held = await service.existing_async(who.tenant, trigger_id)  # 404 before the body is read
    asked = await read(request, WhatIfIn)
    return JSONResponse(service.what_if(who, trigger_id, held, asked))
