"""A tenant's dead letters (:mod:`horae.api.dead_letters`): list them (keyset pages; by
trigger, label selector, window of their death, cause and state), inspect one, and redrive one
or many (a dry run first)."""

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import JSONResponse

from horae.api import dead_letters as dl
from horae.api.bodies import RedriveIn
from horae.api.dependencies import (
    NAME_PATTERN,
    REQUEST_VALUE,
    TEXT,
    Author,
    Cursor,
    Limit,
    Reader,
    ServiceDep,
    Since,
    Until,
    read,
)
from horae.api.routes.common import PAGE, json_body, ok

router = APIRouter(tags=["dead letters"])

DeadLetterId = Annotated[str, Path(pattern=r"^[0-9]{1,10}-[0-9]{1,19}$", max_length=31)]
Text = Annotated[str | None, Query(max_length=REQUEST_VALUE.max_len, pattern=TEXT)]
TriggerQuery = Annotated[str | None, Query(pattern=NAME_PATTERN, max_length=63)]
StateQuery = Annotated[str | None, Query(pattern=f"^({'|'.join(dl.STATES)})$")]
DEAD_LETTER: dict[str, Any] = {"type": "object"}
REDRIVE_OUT: dict[str, Any] = {
    "type": "object",
    "required": ["dry_run", "matched"],
    "properties": {
        "dry_run": {"type": "boolean"},
        "matched": {"type": "integer"},
        "ids": {"type": "array", "items": {"type": "string"}},
        "request_id": {"type": "string"},
        "redriven": {"type": "array", "items": {"type": "object"}},
    },
}


@router.get("/v1/dead-letters", responses=ok(200, PAGE))
def list_dead_letters(
    who: Reader,
    service: ServiceDep,
    trigger_id: TriggerQuery = None,
    selector: Text = None,
    since: Since = None,
    until: Until = None,
    cause: Text = None,
    state: StateQuery = None,
    cursor: Cursor = None,
    limit: Limit = 100,
) -> JSONResponse:
    filters = dl.Filters(None, trigger_id, selector, since, until, cause, state)
    return JSONResponse(dl.listing(service, who.tenant, filters, limit, cursor))


@router.get("/v1/dead-letters/{dlq_id}", responses=ok(200, DEAD_LETTER))
def show_dead_letter(dlq_id: DeadLetterId, who: Reader, service: ServiceDep) -> JSONResponse:
    return JSONResponse(dl.inspect(service, who.tenant, dlq_id))


@router.post(
    "/v1/redrives",
    openapi_extra=json_body("RedriveIn"),
    responses=ok(200, REDRIVE_OUT),
)
async def redrive(request: Request, who: Author, service: ServiceDep) -> JSONResponse:
    asked = await read(request, RedriveIn)
    return JSONResponse(await dl.redrive(service, who, asked))
