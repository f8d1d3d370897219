"""Commands on a trigger, each answered 202 with the command's id once the commands topic
acknowledged it: pause, resume, and run now (with the fire key the planner gives that run); and
the cancel of one of its fires (``?fire_key=``; 202, or 200 when it is already cancelled)."""

from typing import Annotated

from fastapi import APIRouter, Query
from starlette.responses import JSONResponse, Response

from horae.api.dependencies import REQUEST_VALUE, TEXT, Author, ServiceDep, TriggerId
from horae.api.routes.common import ACCEPTED, ok
from horae.contracts import events as ev

router = APIRouter(tags=["schedules"])


@router.post(
    "/v1/schedules/{trigger_id}/pause", status_code=202, responses=ok(202, ACCEPTED, "Accepted")
)
async def pause(trigger_id: TriggerId, who: Author, service: ServiceDep) -> dict[str, str]:
    command = await service.act(who, trigger_id, ev.CommandKind.PAUSE)
    return {"command_id": command.command_id}


@router.post(
    "/v1/schedules/{trigger_id}/resume", status_code=202, responses=ok(202, ACCEPTED, "Accepted")
)
async def resume(trigger_id: TriggerId, who: Author, service: ServiceDep) -> dict[str, str]:
    command = await service.act(who, trigger_id, ev.CommandKind.RESUME)
    return {"command_id": command.command_id}


@router.post(
    "/v1/schedules/{trigger_id}/run", status_code=202, responses=ok(202, ACCEPTED, "Accepted")
)
async def run(trigger_id: TriggerId, who: Author, service: ServiceDep) -> dict[str, str]:
    command = await service.act(who, trigger_id, ev.CommandKind.MANUAL_RUN)
    return {"command_id": command.command_id, "fire_key": service.manual_fire_key(command)}


CANCELLED = {
    "type": "object",
    "required": ["fire_key"],
    "properties": {
        "command_id": {"type": "string"},
        "fire_key": {"type": "string"},
        "state": {"type": "string"},
        "detail": {"type": "string"},
    },
}


@router.post(
    "/v1/schedules/{trigger_id}/cancel",
    status_code=202,
    responses=ok(202, CANCELLED, "Accepted") | ok(200, CANCELLED, "Already cancelled"),
)
async def cancel(
    trigger_id: TriggerId,
    fire_key: Annotated[str, Query(max_length=REQUEST_VALUE.max_len, pattern=TEXT)],
    who: Author,
    service: ServiceDep,
) -> Response:
    """Cancel a fire of the trigger that is waiting or retrying (its attempts not yet sent; one
    in flight finishes): 202 once the command is produced, 200 when it is already cancelled."""
    status, body = await service.cancel_fire(who, trigger_id, fire_key)
    return JSONResponse(body, status_code=status)
