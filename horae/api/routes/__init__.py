"""The API's routes, one :class:`fastapi.APIRouter` per resource (FastAPI's "bigger
applications" layout); :func:`horae.api.app.create_app` includes them in :data:`ROUTERS` order.

| module | tag | routes |
|---|---|---|
| :mod:`.health` | service | ``/healthz``, ``/readyz``, ``/metrics`` (no token) |
| :mod:`.identity` | service | the identity tokens' JWKS, OIDC discovery (no token) |
| :mod:`.schedules` | schedules | create, list, show, amend, delete a trigger |
| :mod:`.commands` | schedules | pause, resume, run a trigger now |
| :mod:`.groups` | groups | pause, resume, delete, set policies of the triggers a selector names |
| :mod:`.dryrun` | dry-run | next instants, dry-run of a body, what-if of a change |
| :mod:`.history` | history | fires, a fire's story, lateness, events, audit |
| :mod:`.dead_letters` | dead letters | list, inspect and redrive the tenant's dead letters |
| :mod:`.privileged` | privileged | backfill, horizon (the policy role) |
| :mod:`.targets` | targets | a webhook host's ownership challenge and its check |
| :mod:`.platform` | platform | tenants and their grants, a tenant's suspension |

A route declares its path, role (:mod:`horae.api.dependencies`: ``Reader``, ``Author``,
``Policy``, ``Platform``), parameters and OpenAPI answers; its body reads the request (a small
body through :func:`~horae.api.dependencies.read` into its model), calls the service
(:class:`~horae.api.service.Service`, where what the route does lives) and frames the answer.
The routers are module-level and hold no app's state: the dependencies read it from the request.
"""

from fastapi import APIRouter

from horae.api.routes import (
    commands,
    dead_letters,
    dryrun,
    groups,
    health,
    history,
    identity,
    platform,
    privileged,
    schedules,
    targets,
)

#: every router of the API, in the order they are matched and documented
ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    identity.router,
    schedules.router,
    commands.router,
    groups.router,
    dryrun.router,
    history.router,
    dead_letters.router,
    privileged.router,
    targets.router,
    platform.router,
)
