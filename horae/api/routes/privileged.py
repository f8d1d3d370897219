"""The policy role's acts on a trigger: a backfill of a past window (first its cost and a
confirm token, 200; then, with the token, the command, 202) and a new decision horizon (the next
version, 202 with its ``ETag``)."""

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response

from horae.api.bodies import BackfillIn, HorizonIn
from horae.api.dependencies import Policy, ServiceDep, TriggerId, read
from horae.api.routes.common import json_body, ok
from horae.api.service import etag

router = APIRouter(tags=["privileged"])

BACKFILL_OUT = {
    "type": "object",
    "properties": {
        "fires": {"type": "integer"},
        "confirm": {"type": "string"},
        "expires_in_s": {"type": "integer"},
        "command_id": {"type": "string"},
    },
}
HORIZON_OUT = {
    "type": "object",
    "required": ["version"],
    "properties": {"version": {"type": "integer"}},
}


@router.post(
    "/v1/schedules/{trigger_id}/backfill",
    openapi_extra=json_body("BackfillIn"),
    responses={
        **ok(200, BACKFILL_OUT, "The cost and a confirm token"),
        **ok(202, BACKFILL_OUT, "Accepted"),
    },
)
async def backfill(
    request: Request, trigger_id: TriggerId, who: Policy, service: ServiceDep
) -> Response:
    held = await service.existing_async(who.tenant, trigger_id)  # 404 before the body is read
    asked = await read(request, BackfillIn)
    requested, answer = await service.backfill(who, trigger_id, held, asked)
    return JSONResponse(answer, status_code=202 if requested else 200)


@router.post(
    "/v1/schedules/{trigger_id}/horizon",
    openapi_extra=json_body("HorizonIn"),
    responses=ok(202, HORIZON_OUT, "Accepted"),
)
async def horizon(
    request: Request, trigger_id: TriggerId, who: Policy, service: ServiceDep
) -> Response:
    asked = await read(request, HorizonIn)
    stored = await service.horizon(who, trigger_id, asked.horizon_s)
    return JSONResponse(
        {"version": stored.definition.version}, status_code=202, headers=etag(stored)
    )
