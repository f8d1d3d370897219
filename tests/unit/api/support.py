"""Shared set-up of the API unit tests: settings with two tenants, an in-memory backend, a
virtual clock, a resolver that needs no DNS, and tokens."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

with warnings.catch_warnings():  # starlette deprecates httpx in its TestClient
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from horae.api.app import create_app
from horae.api.auth import issue
from horae.api.memory import MemoryBackend
from horae.api.verification import MemoryVerifications
from horae.contracts.events import Role
from horae.outbound.ssrf import AddressPolicy
from horae.settings import Settings

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
KEYS = {"k1": "first-token-key-of-the-unit-tests-0", "k2": "second-token-key-of-the-unit-tests"}


def settings(shared: dict[str, Any] | None = None, **api: Any) -> Settings:
    return Settings.model_validate(
        {
            **(shared or {}),
            "tenant_keys": {"acme": {"acme-1": "acme-secret"}, "globex": {"globex-1": "g-secret"}},
            "platform_key": "platform-secret",
            "tenant_grants": {"acme": {"horizon_max_s": 172_800}},
            "dispatcher": {
                "webhook_secrets": {
                    "acme": {"acme-hook": "whsec_a"},
                    "globex": {"g-hook": "whsec_g"},
                }
            },
            "api": {"token_keys": KEYS, "token_kid": "k1", "burst": 10_000, **api},
        }
    )


async def resolve(host: str, port: int) -> list[str]:
    """Public addresses for *.example, loopback for internal names."""
    return ["10.0.0.5"] if host.startswith("internal") else ["93.184.216.34"]


@dataclass
class Clock:
    now: datetime = NOW
    mono: float = 1000.0

    def __call__(self) -> datetime:
        return self.now

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        self.mono += seconds


@dataclass
class Api:
    client: TestClient
    backend: MemoryBackend
    clock: Clock
    verifications: MemoryVerifications = field(default_factory=MemoryVerifications)
    served: dict[str, tuple[int, bytes]] = field(default_factory=dict)

    def token(
        self, tenant: str, roles: Sequence[str], subject: str = "alice", kid: str = "k1"
    ) -> str:
        return issue(
            KEYS,
            kid,
            tenant=tenant,
            roles=[Role(r) for r in roles],
            subject=subject,
            ttl_s=3600,
            now=datetime.now(UTC),
        )

    def headers(self, tenant: str = "acme", *roles: str, **extra: str) -> dict[str, str]:
        token = self.token(tenant, roles or ("author",))
        return {"Authorization": f"Bearer {token}", **extra}


def make_api(
    auto_project: bool = True,
    shared: dict[str, Any] | None = None,
    *,
    addresses: AddressPolicy | None = None,
    pinned: bool = False,
    **api: Any,
) -> Api:
    """The app over an in-memory backend; ``addresses``: its SSRF policy (default: :func:`resolve`
    answers); ``pinned``: the verification fetch is the API's own (the pinned sender), else
    what ``Api.served`` holds."""
    clock = Clock()
    backend = MemoryBackend(auto_project=auto_project)
    verifications = MemoryVerifications()
    verifications.verified("acme", "hooks.acme.example", NOW + timedelta(days=365))
    served: dict[str, tuple[int, bytes]] = {}

    async def fetch(url: str) -> tuple[int, bytes]:
        """What the tenant's host serves (``served``), else 404."""
        return served.get(url, (404, b""))

    app = create_app(
        settings(shared, **api),
        backend,
        backend,
        addresses=addresses or AddressPolicy(resolver=resolve),
        verifications=verifications,
        fetch=None if pinned else fetch,
        clock=clock,
        monotonic=clock.monotonic,
    )
    client = TestClient(app, raise_server_exceptions=False)
    return Api(client, backend, clock, verifications, served)


def cron(trigger_id: str = "nightly", expr: str = "0 9 * * *", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "trigger_id": trigger_id,
        "recurrence": {"kind": "cron", "expr": expr, "zone": "Europe/Berlin"},
        "target": {
            "kind": "webhook",
            "url": "https://hooks.acme.example/x",
            "secret_refs": ["acme-hook"],
        },
        "labels": {"team": "ops"},
    }
    body.update(extra)
    return body


def fire_row(
    key: str,
    at: datetime,
    tenant: str = "acme",
    trigger_id: str = "nightly",
    status: str = "succeeded",
    **extra: Any,
) -> dict[str, Any]:
    """A ``fires`` read-model row as the in-memory history holds it (a fired, delivered fire
    unless ``status`` / ``extra`` say otherwise)."""
    row: dict[str, Any] = {
        "fire_key": key,
        "tenant": tenant,
        "trigger_id": trigger_id,
        "scheduled_at": at,
        "due_at": at,
        "state": "fired",
        "status": status,
        "cause": None,
        "lane": "on_time",
        "lateness_ms": 120.0,
        "tzdata_version": "2026a",
        "attempt_count": 1,
        "outcome": status if status in ("succeeded", "failed") else None,
        "origin": "scheduled",
        "trigger_version": 1,
    }
    row.update(extra)
    return row
