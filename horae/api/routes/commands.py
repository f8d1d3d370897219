"""Commands on a trigger, each answered 202 with the command's id once the commands topic
acknowledged it: pause, resume, and run now (with the fire key the planner gives that run)."""

from fastapi import APIRouter

from horae.api.dependencies import Author, ServiceDep, TriggerId
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
