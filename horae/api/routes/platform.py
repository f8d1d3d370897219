"""The platform role's routes: every tenant with its granted ceilings, and a tenant's
suspension (a platform-signed tenant command to every partition of the commands topic, 202)."""

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request

from horae.api.bodies import SuspensionIn
from horae.api.dependencies import NAME_PATTERN, Platform, ServiceDep, read
from horae.api.routes.common import ACCEPTED, json_body, ok

router = APIRouter(tags=["platform"])

TENANTS_OUT = {
    "type": "object",
    "required": ["items"],
    "properties": {"items": {"type": "array", "items": {"type": "object"}}},
}


@router.get("/v1/admin/tenants", responses=ok(200, TENANTS_OUT))
def tenants(who: Platform, service: ServiceDep) -> dict[str, Any]:
    return service.tenants()


@router.put(
    "/v1/admin/tenants/{tenant}/suspension",
    status_code=202,
    openapi_extra=json_body("SuspensionIn"),
    responses=ok(202, ACCEPTED, "Accepted"),
)
async def suspension(
    request: Request,
    tenant: Annotated[str, Path(max_length=63, pattern=NAME_PATTERN)],
    who: Platform,
    service: ServiceDep,
) -> dict[str, str]:
    service.known_tenant(tenant)  # 404 before the body is read
    asked = await read(request, SuspensionIn)
    command = await service.suspension(who, tenant, asked)
    return {"command_id": command.command_id}
