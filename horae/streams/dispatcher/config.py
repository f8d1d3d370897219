"""Configuration of one dispatcher process (built from :class:`horae.settings.Settings`)."""

from __future__ import annotations

import functools
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from horae.contracts.grants import Grants, TenantGrant
from horae.outbound import SenderConfig, SigningKeys
from horae.outbound.oidc import OidcSigner
from horae.outbound.oidc_files import OidcKeyFiles
from horae.settings import Settings

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1024)
def _keys(primary: str, secondary: str | None) -> SigningKeys:
    """The decoded keys of two secrets (decoded once, not on every attempt)."""
    return SigningKeys.from_secrets(primary, secondary)


@dataclass(frozen=True, slots=True)
class TenantLimits:
    """A tenant's dispatch limits over every dispatcher process (from its
    :class:`~horae.contracts.grants.TenantGrant`): ``rate`` (dispatches/s; in-quota work goes
    first, over-quota on-time work only uses spare capacity, catch-up and backfill never go over
    it), ``catchup_share`` (the share of ``rate`` catch-up may use, hard) and ``inflight`` (hard
    cap on its concurrent sends). A process applies its share of them
    (:meth:`~horae.streams.dispatcher.admission.Admission.set_share`)."""

    rate: float = 10.0
    inflight: int = 64
    catchup_share: float = 0.2

    @classmethod
    def of(cls, grant: TenantGrant) -> TenantLimits:
        return cls(grant.dispatch_per_s, grant.max_concurrency, grant.catchup_share)


@dataclass(frozen=True)
class DispatcherConfig:
    """Everything a :class:`~horae.streams.dispatcher.worker.Dispatcher` needs.

    ``grants``: each tenant's dispatch limits (``HORAE_TENANT_GRANTS``, the same grants the
    planner holds definitions to);
    ``webhook_secrets``: tenant -> ref -> ``whsec_`` secret (a trigger's ``Target.secret_refs``
    name refs of its own tenant, current first); ``platform_key``: signs the pause commands the
    breaker writes (None: the breaker only emits ``schedule.failed``); ``command_ttl_s``: the
    planners' longest command lifetime (``HORAE_COMMAND_MAX_TTL_S``), which those commands stay
    within; ``oidc``: mints the identity tokens of targets with ``target.oidc`` (None: no
    issuer or keys configured, and such an attempt is not sent, ``no_oidc_key``)."""

    bootstrap: str
    prefix: str
    slot: str
    allow: tuple[str, ...] = ()
    sender: SenderConfig = field(default_factory=SenderConfig)
    max_inflight: int = 256
    grants: Grants = field(default_factory=Grants)
    breaker_threshold: int = 5
    webhook_secrets: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    callback_secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    callback_ttl_s: int = 3600
    platform_key_id: str = "horae-platform"
    platform_key: bytes | None = None
    command_ttl_s: int = 3600
    session_timeout_ms: int = 10_000
    commit_interval_s: float = 0.05  # most time a finished attempt waits for its transaction
    max_open_per_partition: int = 20_000  # consumed, unfinished orders before a partition pauses
    event_loop: str = "uvloop"  # or "asyncio" (see horae.streams.dispatcher.worker.loop_factory)
    http_client: str = "lean"  # or "aiohttp" (see horae.streams.dispatcher.worker.make_sender)
    oidc: OidcSigner | None = None

    def limits(self, tenant: str) -> TenantLimits:
        """``tenant``'s limits over every dispatcher process (its grant)."""
        return TenantLimits.of(self.grants.grant(tenant))

    def signing_keys(self, tenant: str, refs: tuple[str, ...]) -> SigningKeys | None:
        """The keys of a target's ``secret_refs``, looked up under its own ``tenant`` only
        (current first; a second ref signs too, for rotation); None when no ref resolves (the
        attempt then fails: nothing unsigned leaves)."""
        mine = self.webhook_secrets.get(tenant, {})
        known = [mine[r] for r in refs if r in mine]
        if not known:
            return None
        return _keys(known[0], known[1] if len(known) > 1 else None)

    @classmethod
    def from_settings(
        cls, settings: Settings, bootstrap: str, **overrides: object
    ) -> DispatcherConfig:
        """The configuration the ``dispatcher`` section of ``settings`` describes (and its keys),
        with ``overrides`` applied."""
        mine = settings.dispatcher
        if mine.callback_secret is not None:
            callback = mine.callback_secret.get_secret_value().encode()
        else:
            log.warning("callback_secret unset: callback tokens verify at this process only")
            callback = secrets.token_bytes(32)
        platform_key = settings.platform_key
        oidc = None
        if settings.oidc_issuer and settings.oidc_keys_dir is not None:
            keys = OidcKeyFiles(settings.oidc_keys_dir)
            oidc = OidcSigner(settings.oidc_issuer, keys, settings.oidc_skew_s)
        base = cls(
            bootstrap=bootstrap,
            prefix=settings.topic_prefix,
            slot=mine.slot,
            allow=tuple(mine.allow),
            sender=SenderConfig(
                connect_timeout_s=mine.connect_timeout_s,
                read_timeout_s=mine.read_timeout_s,
                deadline_s=mine.deadline_s,
                max_body_bytes=mine.max_body_bytes,
                pool_size=max(mine.max_inflight, 1),
            ),
            max_inflight=mine.max_inflight,
            grants=settings.grants(),
            breaker_threshold=mine.breaker_threshold,
            webhook_secrets={
                t: {r: v.get_secret_value() for r, v in refs.items()}
                for t, refs in mine.webhook_secrets.items()
            },
            callback_secret=callback,
            callback_ttl_s=mine.callback_ttl_s,
            platform_key_id=settings.platform_key_id,
            platform_key=platform_key.get_secret_value().encode() if platform_key else None,
            command_ttl_s=settings.command_max_ttl_s,
            session_timeout_ms=mine.session_timeout_ms,
            event_loop=mine.event_loop,
            http_client=mine.http_client,
            oidc=oidc,
        )
        return replace(base, **overrides)  # type: ignore[arg-type]
