"""What happened, from the read models: a trigger's fires (decision, delivery, lateness,
outcome), the tenant's fires searched by window, state and label, one fire's story, lateness of
a trigger or the whole tenant, a trigger's events, the tenant's audit. Windows are ``from`` /
``to`` (RFC 3339), pages keyset cursors."""

from typing import Annotated

from fastapi import APIRouter, Path, Query
from starlette.responses import JSONResponse, Response

from horae.api.dependencies import (
    REQUEST_VALUE,
    TEXT,
    Cursor,
    Limit,
    Reader,
    ServiceDep,
    Since,
    TriggerId,
    Until,
)
from horae.api.ports import SHOWN_STATES
from horae.api.routes.common import LATENESS, PAGE, PAGE_PROPERTIES, ok, ref
from horae.api.routes.schedules import Label

router = APIRouter(tags=["history"])

HISTORY_PAGE = {
    "type": "object",
    "required": ["items", "next_cursor", "trigger_state"],
    "properties": {
        **PAGE_PROPERTIES,
        "trigger_state": {"type": "string", "enum": list(SHOWN_STATES)},
    },
}
FIRE_OUT = {
    "type": "object",
    "required": ["fire", "attempts", "outcome", "outcomes"],
    "properties": {
        "fire": {"type": "object"},
        "attempts": {"type": "array", "items": {"type": "object"}},
        "outcome": {"type": ["object", "null"]},
        "outcomes": {"type": "array", "items": {"type": "object"}},
    },
}
TENANT_LATENESS = {
    "type": "object",
    "required": ["tenant", "summary", "triggers"],
    "properties": {
        "tenant": {"type": "string"},
        "summary": LATENESS,
        "triggers": {"type": "array", "items": LATENESS},
    },
}


@router.get("/v1/schedules/{trigger_id}/history", responses=ok(200, HISTORY_PAGE))
def history_of(
    trigger_id: TriggerId,
    who: Reader,
    service: ServiceDep,
    since: Since = None,
    until: Until = None,
    state: Annotated[str | None, Query(max_length=256, pattern=TEXT)] = None,
    cursor: Cursor = None,
    limit: Limit = 100,
) -> Response:
    page = service.fires(
        who.tenant,
        trigger_id,
        since=since,
        until=until,
        state=state,
        cursor=cursor,
        limit=limit,
    )
    return JSONResponse(page)


FIRE_PAGE = {
    "type": "object",
    "required": ["items", "next_cursor"],
    "properties": {
        "items": {"type": "array", "items": ref("FireItem")},
        "next_cursor": {"type": ["string", "null"]},
    },
}


@router.get("/v1/fires", responses=ok(200, FIRE_PAGE))
def search_fires(
    who: Reader,
    service: ServiceDep,
    since: Since = None,
    until: Until = None,
    state: Annotated[str | None, Query(max_length=256, pattern=TEXT)] = None,
    label: Label = None,
    cursor: Cursor = None,
    limit: Limit = 100,
) -> Response:
    page = service.search_fires(
        who.tenant,
        since=since,
        until=until,
        state=state,
        label=label,
        cursor=cursor,
        limit=limit,
    )
    return JSONResponse(page)


@router.get("/v1/fires/{fire_key:path}", responses=ok(200, FIRE_OUT))
def fire(
    fire_key: Annotated[str, Path(max_length=REQUEST_VALUE.max_len, pattern=TEXT)],
    who: Reader,
    service: ServiceDep,
) -> Response:
    return JSONResponse(service.fire_story(who.tenant, fire_key))


@router.get("/v1/schedules/{trigger_id}/lateness", responses=ok(200, LATENESS))
def lateness_of(
    trigger_id: TriggerId,
    who: Reader,
    service: ServiceDep,
    since: Since = None,
    until: Until = None,
) -> Response:
    return JSONResponse(service.trigger_lateness(who.tenant, trigger_id, since, until))


@router.get("/v1/lateness", responses=ok(200, TENANT_LATENESS))
def lateness(
    who: Reader, service: ServiceDep, since: Since = None, until: Until = None
) -> Response:
    return JSONResponse(service.tenant_lateness(who.tenant, since, until))


@router.get("/v1/schedules/{trigger_id}/events", responses=ok(200, PAGE))
def events(
    trigger_id: TriggerId,
    who: Reader,
    service: ServiceDep,
    cursor: Cursor = None,
    limit: Limit = 100,
) -> Response:
    return JSONResponse(service.events(who.tenant, trigger_id, cursor, limit))


@router.get("/v1/audit", responses=ok(200, PAGE))
def audit(
    who: Reader,
    service: ServiceDep,
    since: Since = None,
    until: Until = None,
    cursor: Cursor = None,
    limit: Limit = 100,
) -> Response:
    return JSONResponse(service.audit(who.tenant, since, until, cursor, limit))
