"""The identity tokens' public keys, answered without a token: the JSON Web Key Set that verifies
the ``Authorization: Bearer`` token of a target with ``target.oidc`` (:mod:`horae.outbound.oidc`),
and the OpenID Provider metadata naming it, so a target verifies with any JWT library
(docs/security.md, "Outbound identity"). 404 when the deployment mints no identity tokens
(``HORAE_OIDC_KEYS_DIR`` or ``HORAE_OIDC_ISSUER`` unset)."""

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response

from horae.api import problems
from horae.api.dependencies import ServiceDep
from horae.api.routes.common import ok
from horae.outbound.oidc import OidcKeys, discovery, jwks

router = APIRouter(tags=["service"])

#: how long a receiver may cache the key set: shorter than a rotation's publishing lead
#: (``HORAE_OIDC_PUBLISH_LEAD_S``), so a cached set holds a new key before it signs
CACHE = "public, max-age=300"
JWKS_PATH = "/.well-known/jwks.json"
DISCOVERY_PATH = "/.well-known/openid-configuration"
_OBJECT = {"type": "object"}


def _keys(request: Request) -> OidcKeys | None:
    held: OidcKeys | None = request.app.state.oidc_keys
    return held


@router.get(JWKS_PATH, responses=ok(200, _OBJECT), openapi_extra={"security": []})
def jwks_json(request: Request, service: ServiceDep) -> Response:
    keys = _keys(request)
    if keys is None or not service.settings.oidc_issuer:
        return problems.problem(404, "this deployment mints no identity tokens", instance=JWKS_PATH)
    now = service.clock().timestamp()
    body = jwks(keys.key_set(), now, service.settings.oidc_skew_s)
    return JSONResponse(body, headers={"Cache-Control": CACHE})


@router.get(DISCOVERY_PATH, responses=ok(200, _OBJECT), openapi_extra={"security": []})
def openid_configuration(request: Request, service: ServiceDep) -> Response:
    issuer = service.settings.oidc_issuer
    if _keys(request) is None or not issuer:
        detail = "this deployment mints no identity tokens"
        return problems.problem(404, detail, instance=DISCOVERY_PATH)
    return JSONResponse(discovery(issuer), headers={"Cache-Control": CACHE})
