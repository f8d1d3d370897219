"""Group acts on the triggers a label selector names (:mod:`horae.api.groups`): pause, resume,
delete, or set policies fields — a dry run first (the count and ids), then the act once per
request id, audited as one act."""

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from starlette.responses import JSONResponse, Response

from horae.api.bodies import GroupIn
from horae.api.dependencies import Author, ServiceDep, read
from horae.api.groups import ACTS, group_act
from horae.api.routes.common import json_body, ok

router = APIRouter(tags=["groups"])

GROUP_OUT: dict[str, Any] = {
    "type": "object",
    "required": ["act", "selector", "dry_run", "matched"],
    "properties": {
        "act": {"type": "string", "enum": list(ACTS)},
        "selector": {"type": "string"},
        "dry_run": {"type": "boolean"},
        "matched": {"type": "integer"},
        "would_change": {"type": "integer"},
        "trigger_ids": {"type": "array", "items": {"type": "string"}},
        "request_id": {"type": "string"},
        "replayed": {"type": "boolean"},
        "changed": {"type": "array", "items": {"type": "object"}},
        "unchanged": {"type": "array", "items": {"type": "string"}},
        "failed": {"type": "array", "items": {"type": "object"}},
    },
}
Act = Annotated[str, Path(pattern=f"^({'|'.join(ACTS)})$")]


@router.post("/v1/groups/{act}", openapi_extra=json_body("GroupIn"), responses=ok(200, GROUP_OUT))
async def group(request: Request, act: Act, who: Author, service: ServiceDep) -> Response:
    asked = await read(request, GroupIn)
    return JSONResponse(await group_act(service, who, act, asked))
