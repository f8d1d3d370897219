"""The service's own routes, answered without a token: liveness, readiness (the sink's and the
history source's problems, 503 naming them), and the Prometheus metrics of this process."""

from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import JSONResponse, Response

from horae.api import problems
from horae.api.dependencies import ServiceDep, edge
from horae.api.routes.common import ok

router = APIRouter(tags=["service"])


@router.get("/healthz", openapi_extra={"security": []})
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", responses=ok(200, {"type": "object"}), openapi_extra={"security": []})
def readyz(service: ServiceDep) -> Response:
    broken = service.broken()
    if broken:
        detail = "; ".join(f"{k}: {v}" for k, v in broken.items())
        return problems.problem(503, detail, instance="/readyz")
    return JSONResponse({"kafka": "ok", "postgres": "ok"})


@router.get(
    "/metrics",
    openapi_extra={"security": []},
    response_class=Response,
    responses={200: {"description": "Prometheus text", "content": {"text/plain": {}}}},
)
def metrics(request: Request) -> Response:
    return Response(generate_latest(edge(request).registry), media_type=CONTENT_TYPE_LATEST)
