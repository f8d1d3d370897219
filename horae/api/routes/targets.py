"""A webhook host's ownership: a challenge for the host of a URL (where to serve what, 201),
and its check (the well-known answer fetched through the SSRF policy: verified or failed, and
why)."""

from typing import Annotated

from fastapi import APIRouter, Path, Request
from starlette.responses import JSONResponse, Response

from horae.api.bodies import VerificationIn
from horae.api.dependencies import TEXT, Author, ServiceDep, read
from horae.api.routes.common import json_body, ok

router = APIRouter(tags=["targets"])

CHALLENGE_OUT = {
    "type": "object",
    "required": ["host", "challenge", "well_known_url", "expires_at"],
    "properties": {
        "host": {"type": "string"},
        "challenge": {"type": "string"},
        "well_known_url": {"type": "string"},
        "expires_at": {"type": "string", "format": "date-time"},
        "answer": {"type": "string"},
    },
}
CHECK_OUT = {
    "type": "object",
    "required": ["host", "state", "detail"],
    "properties": {
        "host": {"type": "string"},
        "state": {"type": "string", "enum": ["verified", "failed"]},
        "detail": {"type": "string"},
        "verified_until": {"type": ["string", "null"], "format": "date-time"},
    },
}


@router.post(
    "/v1/targets/verifications",
    status_code=201,
    openapi_extra=json_body("VerificationIn"),
    responses=ok(201, CHALLENGE_OUT, "Created"),
)
async def verification(request: Request, who: Author, service: ServiceDep) -> Response:
    asked = await read(request, VerificationIn)
    return JSONResponse(await service.verification(who.tenant, asked.url), status_code=201)


@router.post("/v1/targets/verifications/{host}/check", responses=ok(200, CHECK_OUT))
async def verification_check(
    host: Annotated[str, Path(max_length=300, pattern=TEXT)], who: Author, service: ServiceDep
) -> Response:
    return JSONResponse(await service.verification_check(who.tenant, host))
