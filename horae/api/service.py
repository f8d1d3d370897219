"""What the API does, behind its routes: validate with the planner's own functions, sign with
the platform key, produce through the sink, read through the history source.

The API adds no scheduling logic. A definition is decoded and validated by ingress
(:func:`~horae.contracts.ingress.decode_definition`, :func:`validate_definition`, and at the end
:func:`ingest_definition` on the very bytes produced), checked against the platform limits
(:func:`~horae.domain.validate_trigger`), the grants (:class:`~horae.contracts.grants.Grants`, with
the *token's* roles, so the ceilings apply although the platform key signs), the tenant's webhook
secret refs and the SSRF policy of the dispatcher (:class:`~horae.outbound.ssrf.AddressPolicy`).
Every definition and command records the acting subject and roles (``author`` /
``requested_by``: :attr:`Principal.actor`) and the role the act needs.

Read-your-writes: the versions the API wrote are kept for ``api.read_your_writes_s`` in a
:class:`~horae.api.ports.RecentWrites` shared by every API process and merged into reads (the
higher version wins), so a GET after a create or amend sees it even before the projector has
caught up, whichever process serves it. A write claims its version there before producing, so two
processes racing on one trigger cannot both produce the same version (the loser answers 412).

Every route's act is one method here (:meth:`Service.create`, :meth:`~Service.amend`,
:meth:`~Service.backfill`, :meth:`~Service.fires`, ...) taking the principal and plain values (a
small body already validated into its model, :mod:`horae.api.bodies`) and returning what the
answer holds; a refusal is an :class:`ApiError`, the problem the API answers. The routes
(:mod:`horae.api.routes`) read the request, call one or two of these, and frame the answer
(status, ``ETag``, ``Location``).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
import uuid
import zlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.concurrency import run_in_threadpool

from horae.api.auth import Principal
from horae.api.bodies import BackfillIn, SuspensionIn, WhatIfIn
from horae.api.ports import (
    BadCursor,
    BadValue,
    DefinitionSink,
    HistorySource,
    ListedTrigger,
    RecentWrites,
    StoredTrigger,
)
from horae.api.render import (
    history_item,
    json_text,
    lateness_json,
    listed,
    stored_body,
    upcoming_instants,
)
from horae.api.schemas import FILLED, REPORTED
from horae.api.verification import (
    CHALLENGE_TTL_S,
    WELL_KNOWN,
    Challenge,
    Fetch,
    FetchFailed,
    VerificationStore,
    host_of,
    how_to_verify,
    matches,
)
from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import DecodeError, default_codec
from horae.contracts.domain_map import trigger_spec
from horae.contracts.grants import Grants
from horae.contracts.ingress import NAME, Source, decode_definition, ingest_definition
from horae.contracts.ingress import validate_definition as validate_fields
from horae.contracts.textrules import check_command
from horae.delivery.table import deliverer
from horae.domain import Limits, validate_trigger
from horae.domain.errors import ValidationError
from horae.domain.keys import FireKey, Origin
from horae.domain.queries import instants_between, next_instants, occurrences, what_if
from horae.domain.schedule import BoundedSchedule
from horae.domain.trigger import TriggerSpec
from horae.outbound.ssrf import AddressPolicy, AddressRefused, ResolutionError
from horae.settings import Settings

API_KEY_ID = "api-token"  # the key id the token's roles are checked under (never signs)
CONFIRM_TTL_S = 600  # a backfill confirm token
WRITE_STRIPES = 256
#: how long an unconfirmed claim of a version blocks others (past the sink's ack timeout)
CLAIM_TTL_S = 60


class ApiError(Exception):
    """An answer other than success: an RFC 9457 problem."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        errors: list[dict[str, str]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status, self.title, self.detail = status, title, detail
        self.errors, self.headers = errors, headers


def invalid(field: str, message: str) -> ApiError:
    return ApiError(
        422, "Invalid request", f"{field}: {message}", [{"field": field, "message": message}]
    )


def checked(command: ev.Command) -> ev.Command:
    """``command`` if its text fields keep the ingress rules the planner applies, else 422 naming
    the field (``reason``; ``requested_by`` is the token's subject)."""
    try:
        check_command(command)
    except ValidationError as exc:
        raise invalid(exc.field, exc.message) from None
    return command


def not_found(what: str) -> ApiError:
    return ApiError(404, "Not found", f"{what} not found")


def etag(s: StoredTrigger) -> dict[str, str]:
    """The ``ETag`` header of a trigger's answer: its version."""
    return {"ETag": f'"{s.definition.version}"'}


def version_of(if_match: str) -> int | None:
    """The version an ``If-Match`` header names (``None``: not a version of ours)."""
    text = if_match.strip().removeprefix("W/").strip('"')
    return int(text) if text.isdigit() else None


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _window(
    since: datetime | None, until: datetime | None, now: datetime, back: timedelta
) -> tuple[datetime, datetime]:
    """``[from, to)``: ``to`` defaults to a day ahead, ``from`` to ``back`` before ``to``."""
    try:
        end = _utc(until) or now + timedelta(days=1)
        start = _utc(since) or end - back
    except OverflowError:
        raise invalid("from", "out of range") from None
    if end < start:
        raise invalid("to", "before from")
    return start, end


def _decode_error(exc: DecodeError) -> ApiError:
    field, sep, message = exc.detail.partition(": ")
    return invalid(field if sep else "<body>", message if sep else exc.detail)


@dataclass
class Service:
    settings: Settings
    sink: DefinitionSink
    history: HistorySource
    addresses: AddressPolicy
    verifications: VerificationStore
    fetch: Fetch
    writes: RecentWrites
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    monotonic: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self._writes = [asyncio.Lock() for _ in range(WRITE_STRIPES)]
        self._runs: dict[tuple[str, str, datetime], int] = {}
        self._grants: Grants = self.settings.grants()
        self._keys = self.settings.tenant_key_bytes()
        self._codec = default_codec()

    def writing(self, tenant: str, trigger_id: str) -> asyncio.Lock:
        """The lock that serializes this process's writes to one trigger (read the version,
        check ``If-Match``, produce the next); across processes the claim in
        :class:`RecentWrites` does (:meth:`publish`)."""
        return self._writes[zlib.crc32(f"{tenant}/{trigger_id}".encode()) % WRITE_STRIPES]

    # --- reads ----------------------------------------------------------------------------
    def current(self, tenant: str, trigger_id: str) -> StoredTrigger | None:
        """The latest version: the projection's, or a newer one the API wrote (shown suspended
        while the projection shows its tenant suspended)."""
        stored = self.history.trigger(tenant, trigger_id)
        mine = self.writes.recent(tenant, [trigger_id], self.clock()).get(trigger_id)
        if mine is None:
            return stored
        if stored is None or stored.definition.version < mine.definition.version:
            return newer(mine, stored.shown if stored is not None else None)
        return stored

    def existing(self, tenant: str, trigger_id: str) -> StoredTrigger:
        """The live or paused trigger (404 when absent, deleted or another tenant's)."""
        held = self.current(tenant, trigger_id)
        if held is None or held.definition.state is ev.DefinitionState.DELETED:
            raise not_found(f"trigger {trigger_id!r}")
        return held

    def merged_page(self, tenant: str, items: list[ListedTrigger]) -> list[ListedTrigger]:
        """List items with the API's newer versions merged in (a trigger the projection does
        not list yet is not added: the list is the projection's pages)."""
        if not items:
            return items
        held = self.writes.recent(tenant, [i.trigger_id for i in items], self.clock())
        out = []
        for item in items:
            mine = held.get(item.trigger_id)
            if mine is not None and mine.definition.version > item.version:
                out.append(listed(newer(mine, item.state)))
            else:
                out.append(item)
        return out

    def now_s(self) -> int:
        return int(self.clock().timestamp())

    def out(self, s: StoredTrigger) -> dict[str, Any]:
        """TriggerOut: the definition's JSON form, its states, dates and next three instants
        (none unless it is live)."""
        body = stored_body(s)
        body["next_instants"] = upcoming_instants(s.shown, s.definition.recurrence, self.now_s())
        return body

    def listed_out(
        self, item: ListedTrigger, now: int, last: Mapping[str, Any] | None = None
    ) -> str:
        """TriggerOut JSON text of a list item, its next instants after ``now`` and its last run
        (``last``: its latest fire scheduled before now, else none) added."""
        upcoming = json.dumps(upcoming_instants(item.state, item.recurrence, now))
        ran = json.dumps(None if last is None else history_item(dict(last)))
        return f'{item.body[:-1]},"next_instants":{upcoming},"last_run":{ran}}}'

    def last_runs(self, tenant: str, trigger_ids: list[str]) -> dict[str, Mapping[str, Any]]:
        """The last run of each trigger: its latest fire scheduled before now (the read model's
        ``last_fires``, one statement for a page), by trigger id."""
        if not trigger_ids:
            return {}
        return self.history.last_fires(tenant, trigger_ids, self.clock())

    def shown(self, s: StoredTrigger) -> dict[str, Any]:
        """TriggerOut as a GET shows it: :meth:`out` and its ``last_run`` (a history item of its
        latest fire scheduled before now; ``null`` before the first)."""
        body = self.out(s)
        last = self.last_runs(s.definition.tenant, [s.definition.trigger_id])
        found = last.get(s.definition.trigger_id)
        body["last_run"] = None if found is None else history_item(dict(found))
        return body

    # --- definitions ----------------------------------------------------------------------
    def _platform_key(self) -> bytes:
        key = self.settings.platform_key
        if key is None or not key.get_secret_value():
            raise ApiError(503, "Not configured", "HORAE_PLATFORM_KEY is not set: cannot sign")
        return key.get_secret_value().encode()

    def parse(
        self,
        principal: Principal,
        body: Any,
        *,
        trigger_id: str | None,
        version: int,
        state: str,
        role: ev.Role = ev.Role.AUTHOR,
    ) -> ev.TriggerDefinition:
        """Validate a TriggerIn body as ingress does and return the (unsigned) definition."""
        if not isinstance(body, dict):
            raise invalid("<body>", "expected a JSON object")
        for name in FILLED:
            if name in body:
                raise invalid(name, "filled by the API (from the token and the version held)")
        if trigger_id is not None:
            if body.get("trigger_id", trigger_id) != trigger_id:
                raise invalid("trigger_id", "differs from the trigger id in the path")
            body = {**body, "trigger_id": trigger_id}
        if body.get("state", state) not in ("live", "paused"):
            raise invalid("state", "live or paused (delete with DELETE)")
        now = self.clock()
        obj = {
            "state": state,
            **body,
            "tenant": principal.tenant,
            "version": version,
            "authored_at": now.astimezone(UTC).isoformat(),
            "author": principal.actor,
            "role": role.value,
        }
        try:
            d = decode_definition(json.dumps(obj).encode())
        except DecodeError as exc:
            raise _decode_error(exc) from None
        except (ValueError, OverflowError) as exc:
            raise invalid("<body>", str(exc)) from None
        try:
            validate_fields(d)
            validate_trigger(
                trigger_spec(d),
                int(now.timestamp()),
                Limits(min_interval_s=self.settings.min_interval_s),
            )
        except ValidationError as exc:
            raise invalid(exc.field, exc.message) from None
        except (ValueError, OverflowError) as exc:
            raise invalid("recurrence", str(exc)) from None
        problem = self._grants.check_secret_refs(d)
        if problem is not None:
            field, _, message = problem.partition(": ")
            raise invalid(field, message)
        return d

    def authorize(
        self,
        principal: Principal,
        d: ev.TriggerDefinition,
        prior: StoredTrigger | None,
        also: frozenset[ev.Role] = frozenset(),
    ) -> None:
        """403 unless the token's roles (plus ``also``: the horizon route's amend) grant the act
        and every ask above the defaults, within the tenant's ceilings (checked as the planner
        checks a tenant key)."""
        roles = principal.roles | also
        grants = replace(self._grants, roles={d.tenant: {API_KEY_ID: roles}})
        probe = replace(d, signature=ev.Signature(key_id=API_KEY_ID, value=""))
        refused = grants.check_definition(probe, prior.definition if prior else None)
        if refused is not None:
            raise ApiError(403, "Forbidden", refused.detail.replace(repr(API_KEY_ID), "token"))

    async def check_target(self, d: ev.TriggerDefinition) -> None:
        """The dispatcher's SSRF policy on the URL a target calls (its kind's
        :meth:`~horae.delivery.port.Deliverer.egress_url`; none for an event target), then
        (``api.require_verified_targets``) the tenant's verification of its host (422 naming the
        reason and how to verify)."""
        url = deliverer(d.target.kind).egress_url(d.target)
        if url is None or d.state is ev.DefinitionState.DELETED:
            return
        await self.check_address(url, "target.url")
        if not self.settings.api.require_verified_targets:
            return
        host, _ = host_of(url)
        until = await asyncio.to_thread(self.verifications.verified_until, d.tenant, host)
        if until is None or until <= self.clock():
            raise invalid("target.url", how_to_verify(host, url))

    async def check_address(self, url: str, field: str) -> None:
        """422 unless the dispatcher's SSRF policy allows ``url``."""
        try:
            await self.addresses.check(url)
        except AddressRefused as exc:
            raise invalid(field, f"refused by the SSRF policy: {exc}") from None
        except ResolutionError as exc:
            raise invalid(field, f"does not resolve: {exc}") from None
        except ValueError as exc:
            raise invalid(field, str(exc)) from None

    # --- target ownership verification --------------------------------------------------
    def tenant_secrets(self, tenant: str) -> list[str]:
        refs = self.settings.dispatcher.webhook_secrets.get(tenant, {})
        return [secret.get_secret_value() for secret in refs.values()]

    async def challenge(self, tenant: str, url: Any) -> Challenge:
        """A new challenge for the host of ``url`` (422 for a URL the dispatcher would refuse,
        or a tenant without a webhook secret to sign the answer with)."""
        if not isinstance(url, str):
            raise invalid("url", "expected the webhook URL")
        try:
            host, origin = host_of(url)
        except ValueError as exc:
            raise invalid("url", str(exc)) from None
        await self.check_address(url, "url")
        if not self.tenant_secrets(tenant):
            raise invalid("url", f"tenant {tenant!r} has no webhook secret to sign the answer")
        token = uuid.uuid4().hex
        expires = self.clock() + timedelta(seconds=CHALLENGE_TTL_S)
        made = Challenge(tenant, host, token, f"{origin}{WELL_KNOWN}{token}", expires)
        await asyncio.to_thread(self.verifications.put_challenge, made)
        return made

    async def check_challenge(self, tenant: str, host: str) -> tuple[bool, str, datetime | None]:
        """(verified, why, until): fetch the well-known answer and compare."""
        made = await asyncio.to_thread(self.verifications.challenge, tenant, host.lower())
        if made is None:
            raise not_found(f"challenge for host {host!r} (POST /v1/targets/verifications)")
        if made.expires_at <= self.clock():
            raise invalid("host", "the challenge expired: ask for a new one")
        await self.check_address(made.well_known_url, "host")
        try:
            status, body = await self.fetch(made.well_known_url)
        except FetchFailed as exc:  # the sender's result and detail: no answer came
            return False, f"{made.well_known_url}: {exc}", None
        except Exception as exc:
            return False, f"{made.well_known_url}: {type(exc).__name__}", None
        if status != 200:
            return False, f"{made.well_known_url} answered {status}", None
        if not matches(body, self.tenant_secrets(tenant), tenant, made.host, made.token):
            return False, "the answer is not the HMAC of the challenge with a webhook secret", None
        until = self.clock() + timedelta(seconds=self.settings.api.verification_ttl_s)
        await asyncio.to_thread(self.verifications.verified, tenant, made.host, until)
        return True, "verified", until

    async def publish(self, d: ev.TriggerDefinition, prior: StoredTrigger | None) -> StoredTrigger:
        """Sign with the platform key, re-check with ingress on the record's wire bytes (what the
        planner decodes), claim the version (412 when another process claimed it first),
        produce, and confirm it (read-your-writes) or release it."""
        signed = signing.sign(d, self.settings.platform_key_id, self._platform_key())
        wire = self._codec.encode(signed)
        key = ev.trigger_key(signed.tenant, signed.trigger_id).encode()
        checked = ingest_definition(
            wire, key, Source("api", 0, 0), self._keys, now=self.clock(), grants=self._grants
        )
        if isinstance(checked, ev.Quarantined):
            status = 403 if checked.cause in ("unknown-tenant", "cross-tenant") else 422
            raise ApiError(status, "Refused by ingress", f"{checked.cause}: {checked.detail}")
        created = prior.created_at if prior is not None else signed.authored_at
        stored = StoredTrigger(signed, created, signed.authored_at)
        now = self.clock()
        claim_until = now + timedelta(seconds=CLAIM_TTL_S)
        if not await asyncio.to_thread(self.writes.claim, stored, now, claim_until):
            raise ApiError(
                409 if prior is None else 412,
                "Conflict" if prior is None else "Precondition failed",
                f"version {signed.version} of trigger {signed.trigger_id!r} is being written "
                "by another request: read it again",
            )
        tenant, trigger_id, version = signed.tenant, signed.trigger_id, signed.version
        try:
            await self.sink.put_definition(signed)
        except Exception as exc:
            await asyncio.to_thread(self.writes.release, tenant, trigger_id, version)
            raise ApiError(
                503, "Unavailable", f"the definition was not acknowledged: {exc}"
            ) from None
        until = self.clock() + timedelta(seconds=self.settings.api.read_your_writes_s)
        await asyncio.to_thread(self.writes.confirm, tenant, trigger_id, version, until)
        return stored

    # --- commands -------------------------------------------------------------------------
    async def command(
        self,
        principal: Principal,
        trigger_id: str,
        kind: ev.CommandKind,
        role: ev.Role,
        *,
        reason: str | None = None,
        window: tuple[datetime, datetime] | None = None,
        command_id: str | None = None,
        cancel_fire_key: str | None = None,
    ) -> ev.Command:
        """A platform-signed command recording the actor, produced; returns it (``command_id``:
        its id, e.g. derived from a request id; default a new one; ``cancel_fire_key``: a
        cancel of that fire, which travels as kind ``pause``, docs/contracts.md)."""
        now = self.clock().astimezone(UTC)
        act = "cancel" if cancel_fire_key is not None else kind.value
        command = ev.Command(
            command_id=command_id or f"api-{act}-{uuid.uuid4().hex}",
            tenant=principal.tenant,
            trigger_id=trigger_id,
            kind=kind,
            requested_by=principal.actor,
            role=role,
            requested_at=now,
            backfill_from=window[0] if window else None,
            backfill_to=window[1] if window else None,
            reason=reason,
            expires_at=now + timedelta(seconds=self.settings.command_max_ttl_s),
            cancel_fire_key=cancel_fire_key,
        )
        checked(command)
        signed = signing.sign(command, self.settings.platform_key_id, self._platform_key())
        try:
            await self.sink.put_command(signed)
        except Exception as exc:
            raise ApiError(503, "Unavailable", f"the command was not acknowledged: {exc}") from None
        return signed

    async def put_audit(self, entry: ev.AuditEntry) -> None:
        """Produce an audit entry of an act the API did itself (a group act, a redrive); 503
        when the broker did not acknowledge it."""
        try:
            await self.sink.put_audit(entry)
        except Exception as exc:
            raise ApiError(
                503, "Unavailable", f"the audit entry was not acknowledged: {exc}"
            ) from None

    def manual_fire_key(self, command: ev.Command) -> str:
        """The fire key the planner gives this manual run, assuming no other producer sent a
        manual run of the trigger in the same second (the planner numbers those in order)."""
        instant = command.requested_at.replace(microsecond=0)
        slot = (command.tenant, command.trigger_id, instant)
        sequence = self._runs.get(slot, 0)
        self._runs[slot] = sequence + 1
        if len(self._runs) > 10_000:
            self._runs.pop(next(iter(self._runs)))
        key = FireKey(
            command.tenant, command.trigger_id, int(instant.timestamp()), sequence, Origin.MANUAL
        )
        return key.canonical()

    # --- backfill confirm tokens ----------------------------------------------------------
    def confirm_token(
        self, tenant: str, trigger_id: str, version: int, start: int, end: int
    ) -> str:
        expires = int(self.clock().timestamp()) + CONFIRM_TTL_S
        return f"{expires}.{self._confirm_mac(tenant, trigger_id, version, start, end, expires)}"

    def check_confirm(
        self, token: str, tenant: str, trigger_id: str, version: int, start: int, end: int
    ) -> None:
        expires_text, _, mac = token.partition(".")
        if not expires_text.isdigit():
            raise invalid("confirm", "not a confirm token of this API")
        expires = int(expires_text)
        want = self._confirm_mac(tenant, trigger_id, version, start, end, expires)
        if not hmac.compare_digest(mac, want):
            raise invalid("confirm", "does not match this trigger version and window")
        if expires <= self.clock().timestamp():
            raise invalid("confirm", "expired: ask for the cost again")

    def _confirm_mac(
        self, tenant: str, trigger_id: str, version: int, start: int, end: int, expires: int
    ) -> str:
        text = f"backfill|{tenant}|{trigger_id}|{version}|{start}|{end}|{expires}"
        return hmac.new(self._platform_key(), text.encode(), hashlib.sha256).hexdigest()

    # --- the routes' acts: schedules ------------------------------------------------------
    async def existing_async(self, tenant: str, trigger_id: str) -> StoredTrigger:
        """:meth:`existing`, read in a worker thread (the read models are read blocking)."""
        return await run_in_threadpool(self.existing, tenant, trigger_id)

    def found(self, tenant: str, trigger_id: str) -> StoredTrigger:
        """The latest version, deleted included (404 when absent or another tenant's)."""
        held = self.current(tenant, trigger_id)
        if held is None:
            raise not_found(f"trigger {trigger_id!r}")
        return held

    async def create(self, principal: Principal, body: Any) -> StoredTrigger:
        """A new trigger from a TriggerIn body, at version 1 or, for the id of a deleted
        trigger, the version after (409 while a live or paused trigger has the id)."""
        trigger_id = body.get("trigger_id") if isinstance(body, dict) else None
        if not isinstance(trigger_id, str) or not NAME.match(trigger_id):
            raise invalid("trigger_id", "expected 1-63 chars of a-z 0-9 . _ - ")
        async with self.writing(principal.tenant, trigger_id):
            prior = await run_in_threadpool(self.current, principal.tenant, trigger_id)
            if prior is not None and prior.definition.state is not ev.DefinitionState.DELETED:
                raise ApiError(
                    409, "Conflict", f"trigger {trigger_id!r} exists (amend it with PUT)"
                )
            version = prior.definition.version + 1 if prior else 1
            d = self.parse(principal, body, trigger_id=None, version=version, state="live")
            self.authorize(principal, d, None)
            await self.check_target(d)
            return await self.publish(d, None)

    def listing(
        self,
        tenant: str,
        *,
        cursor: str | None,
        limit: int,
        label: str | None,
        state: str | None,
    ) -> str:
        """A page of the tenant's triggers as JSON text (``label``: ``key:value``; ``state``:
        a shown state, else every trigger but the deleted), the API's newer versions merged."""
        pair = None
        if label is not None:
            k, _, v = label.partition(":")
            pair = (k, v)
        triggers = self.history.triggers
        page = self._page(
            lambda: triggers(tenant, limit=limit, cursor=cursor, label=pair, state=state),
            cursor=cursor,
        )
        items = [
            s
            for s in self.merged_page(tenant, page.items)
            if (s.state == state if state else s.state != "deleted")
            and (pair is None or s.labels.get(pair[0]) == pair[1])
        ]
        now = self.now_s()
        last = self.last_runs(tenant, [s.trigger_id for s in items])
        rendered = ",".join(self.listed_out(s, now, last.get(s.trigger_id)) for s in items)
        return f'{{"items":[{rendered}],"next_cursor":{json.dumps(page.next_cursor)}}}'

    async def amend(
        self, principal: Principal, trigger_id: str, body: Any, if_match: str | None
    ) -> StoredTrigger:
        """The next version from a TriggerIn body: 428 without ``If-Match``, 412 (with the
        current ETag) unless it names the version held; the run state is kept."""
        async with self.writing(principal.tenant, trigger_id):
            held = await run_in_threadpool(self.existing, principal.tenant, trigger_id)
            if if_match is None:
                raise ApiError(428, "Precondition required", 'If-Match: "<version>" is required')
            version = held.definition.version
            if version_of(if_match) != version:
                raise ApiError(
                    412,
                    "Precondition failed",
                    f"stale version: the trigger is at version {version}",
                    headers=etag(held),
                )
            state = held.definition.state.value
            d = self.parse(principal, body, trigger_id=trigger_id, version=version + 1, state=state)
            self.authorize(principal, d, held)
            await self.check_target(d)
            return await self.publish(d, held)

    async def delete(self, principal: Principal, trigger_id: str, if_match: str | None) -> None:
        """The deleted version after the one held (412 when ``If-Match`` names another)."""
        async with self.writing(principal.tenant, trigger_id):
            held = await run_in_threadpool(self.existing, principal.tenant, trigger_id)
            if if_match is not None and version_of(if_match) != held.definition.version:
                raise ApiError(
                    412,
                    "Precondition failed",
                    f"stale version: the trigger is at version {held.definition.version}",
                )
            d = held.definition
            gone = ev.TriggerDefinition(
                **{
                    **{f: getattr(d, f) for f in d.__dataclass_fields__},
                    "version": d.version + 1,
                    "state": ev.DefinitionState.DELETED,
                    "authored_at": self.clock().astimezone(UTC),
                    "author": principal.actor,
                    "role": ev.Role.AUTHOR,
                    "signature": None,
                }
            )
            self.authorize(principal, gone, held)
            await self.publish(gone, held)

    async def act(self, principal: Principal, trigger_id: str, kind: ev.CommandKind) -> ev.Command:
        """Pause, resume or run an existing trigger: the command, produced."""
        await run_in_threadpool(self.existing, principal.tenant, trigger_id)
        return await self.command(principal, trigger_id, kind, ev.Role.AUTHOR)

    # --- the routes' acts: dry-run and what-if --------------------------------------------
    def next_of(self, tenant: str, trigger_id: str, n: int) -> list[dict[str, Any]]:
        """The next ``n`` instants of an existing trigger."""
        held = self.existing(tenant, trigger_id)
        return upcoming(held.definition, self.now_s(), n)

    def dry_run(self, principal: Principal, body: Any, n: int) -> list[dict[str, Any]]:
        """The next ``n`` instants of a TriggerIn body, validated as a create would be."""
        d = self.parse(principal, body, trigger_id=None, version=1, state="live")
        return upcoming(d, self.now_s(), n)

    def what_if(
        self, principal: Principal, trigger_id: str, held: StoredTrigger, asked: WhatIfIn
    ) -> dict[str, Any]:
        """The held version's instants and the proposal's over the window, and the difference."""
        d = held.definition
        proposed = self.parse(
            principal, asked.proposed, trigger_id=trigger_id, version=d.version + 1, state="live"
        )
        return compare(d, proposed, asked.start, asked.end)

    # --- the routes' acts: history --------------------------------------------------------
    def _page(self, func: Callable[..., Any], *args: Any, cursor: str | None) -> Any:
        """``func``'s page; a cursor it refuses, or whose parts the database refuses, is 422
        (another value the database refuses is the handler's 422)."""
        try:
            return func(*args)
        except BadCursor:
            raise invalid("cursor", "not a cursor of this API") from None
        except BadValue:
            if cursor is None:
                raise
            raise invalid("cursor", "not a cursor of this API") from None

    def fires(
        self,
        tenant: str,
        trigger_id: str,
        *,
        since: datetime | None,
        until: datetime | None,
        state: str | None,
        cursor: str | None,
        limit: int,
    ) -> dict[str, Any]:
        """A page of a trigger's fires in the window (default: the week before a day ahead),
        ``state`` a comma-separated filter, with the trigger's shown state."""
        held = self.found(tenant, trigger_id)
        start, end = _window(since, until, self.clock(), timedelta(days=7))
        states = [s for s in (state or "").split(",") if s] or None
        page = self._page(
            self.history.fires, tenant, trigger_id, start, end, states, limit, cursor, cursor=cursor
        )
        return {
            "items": [history_item(r) for r in page.items],
            "next_cursor": page.next_cursor,
            "trigger_state": held.shown,
        }

    def search_fires(
        self,
        tenant: str,
        *,
        since: datetime | None,
        until: datetime | None,
        state: str | None,
        label: str | None,
        cursor: str | None,
        limit: int,
    ) -> dict[str, Any]:
        """A page of the tenant's fires across its triggers in the window (default: the week
        before a day ahead), ``state`` a comma-separated filter on the shown state, ``label``
        ``key:value`` of their triggers; each item a history item with its trigger id."""
        start, end = _window(since, until, self.clock(), timedelta(days=7))
        states = [s for s in (state or "").split(",") if s] or None
        pair = None
        if label is not None:
            k, _, v = label.partition(":")
            pair = (k, v)
        search = self.history.search_fires
        page = self._page(
            lambda: search(tenant, start, end, states, pair, limit, cursor), cursor=cursor
        )
        return {
            "items": [history_item(r) | {"trigger_id": r["trigger_id"]} for r in page.items],
            "next_cursor": page.next_cursor,
        }

    def fire_story(self, tenant: str, fire_key: str) -> dict[str, Any]:
        """One fire with its attempts and outcomes (404 when absent or another tenant's)."""
        story = self.history.fire(tenant, fire_key)
        if story is None:
            raise not_found(f"fire {fire_key!r}")
        answer: dict[str, Any] = json_text(
            {
                "fire": history_item(story.fire)
                | {
                    "trigger_id": story.fire["trigger_id"],
                    "command_id": story.fire.get("command_id"),
                },
                "attempts": story.attempts,
                "outcome": story.outcome,
                "outcomes": story.outcomes,
            }
        )
        return answer

    def trigger_lateness(
        self, tenant: str, trigger_id: str, since: datetime | None, until: datetime | None
    ) -> dict[str, Any]:
        """A trigger's lateness summary over the window."""
        if self.current(tenant, trigger_id) is None:
            raise not_found(f"trigger {trigger_id!r}")
        start, end = _window(since, until, self.clock(), timedelta(days=7))
        summary, _ = self.history.lateness(tenant, start, end, trigger_id)
        return lateness_json(summary)

    def tenant_lateness(
        self, tenant: str, since: datetime | None, until: datetime | None
    ) -> dict[str, Any]:
        """The tenant's lateness summary over the window, and one row per trigger."""
        start, end = _window(since, until, self.clock(), timedelta(days=7))
        summary, rows = self.history.lateness(tenant, start, end, None)
        return {
            "tenant": tenant,
            "summary": lateness_json(summary),
            "triggers": [lateness_json(r) for r in rows],
        }

    def events(
        self, tenant: str, trigger_id: str, cursor: str | None, limit: int
    ) -> dict[str, Any]:
        """A page of a trigger's definition and command events, and its last run (a history
        item, ``None`` before the first)."""
        if self.current(tenant, trigger_id) is None:
            raise not_found(f"trigger {trigger_id!r}")
        page = self._page(self.history.events, tenant, trigger_id, limit, cursor, cursor=cursor)
        last = self.last_runs(tenant, [trigger_id]).get(trigger_id)
        return {
            "items": json_text(page.items),
            "next_cursor": page.next_cursor,
            "last_run": None if last is None else history_item(dict(last)),
        }

    def audit(
        self,
        tenant: str,
        since: datetime | None,
        until: datetime | None,
        cursor: str | None,
        limit: int,
    ) -> dict[str, Any]:
        """A page of the tenant's audit records in the window (default: 30 days)."""
        start, end = _window(since, until, self.clock(), timedelta(days=30))
        page = self._page(self.history.audit, tenant, start, end, limit, cursor, cursor=cursor)
        return {"items": json_text(page.items), "next_cursor": page.next_cursor}

    # --- the routes' acts: a fire's cancel -------------------------------------------------
    async def cancel_fire(
        self, principal: Principal, trigger_id: str, fire_key: str
    ) -> tuple[int, dict[str, Any]]:
        """Cancel the fire ``fire_key`` of the tenant's trigger ``trigger_id`` that is waiting or
        retrying: ``(202, {command_id, fire_key})`` once its platform-signed cancel command
        (``cancel_fire_key``, kind ``pause``) is produced; ``(200, ...)`` when the read model
        already shows it cancelled (nothing produced). 404 when it is no fire of that trigger of
        the tenant (another tenant's included) or the trigger is gone; 409 naming why when
        nothing is left to cancel: an outcome already recorded, a decision that dispatched
        nothing, an event target."""
        story = await run_in_threadpool(self.history.fire, principal.tenant, fire_key)
        if story is None or story.fire.get("trigger_id") != trigger_id:
            raise not_found(f"fire {fire_key!r} of trigger {trigger_id!r}")
        fire, shown = story.fire, story.outcome or {}
        outcome = fire.get("outcome")
        if outcome == ev.OutcomeState.CANCELLED.value:
            why = shown.get("error") or "cancelled"
            return 200, {"fire_key": fire_key, "state": outcome, "detail": f"already {why}"}
        if outcome is not None:
            raise ApiError(
                409, "Conflict", f"fire {fire_key!r} already ended {outcome}: nothing to cancel"
            )
        if fire.get("state") != ev.FireState.FIRED.value:
            decision = fire.get("state") or "undecided"
            raise ApiError(
                409, "Conflict", f"fire {fire_key!r} is {decision}, not fired: nothing to cancel"
            )
        held = await run_in_threadpool(self.existing, principal.tenant, trigger_id)
        if not deliverer(held.definition.target.kind).in_flight:
            raise ApiError(
                409,
                "Conflict",
                f"fire {fire_key!r} is an event target's: delivered when it was decided, "
                "nothing to cancel",
            )
        signed = await self.command(
            principal, trigger_id, ev.CommandKind.PAUSE, ev.Role.AUTHOR, cancel_fire_key=fire_key
        )
        return 202, {"command_id": signed.command_id, "fire_key": fire_key}

    # --- the routes' acts: privileged -----------------------------------------------------
    async def backfill(
        self, principal: Principal, trigger_id: str, held: StoredTrigger, asked: BackfillIn
    ) -> tuple[bool, dict[str, Any]]:
        """(requested, answer): without ``confirm`` the window's cost and a confirm token
        (within the ceilings of the trigger and the tenant), with a valid one the backfill
        command, produced."""
        start, end = asked.start, asked.end
        if end <= start:
            raise invalid("to", "must be after from")
        if end > int(self.clock().timestamp()):
            raise invalid("to", "a backfill covers the past only")
        d = held.definition
        ceiling = min(
            d.quotas.backfill_max_fires,
            self.settings.grants().grant(principal.tenant).backfill_max_fires,
        )
        fires, over = backfill_cost(d, start, end, ceiling)
        if over:
            raise invalid(
                "to", f"the window has more than {ceiling} fires (the tenant's backfill ceiling)"
            )
        confirm = asked.confirm
        if confirm is None:
            token = self.confirm_token(principal.tenant, trigger_id, d.version, start, end)
            return False, {"fires": fires, "confirm": token, "expires_in_s": CONFIRM_TTL_S}
        if not isinstance(confirm, str):
            raise invalid("confirm", "expected the token of the cost answer")
        self.check_confirm(confirm, principal.tenant, trigger_id, d.version, start, end)
        window = (datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC))
        command = await self.command(
            principal,
            trigger_id,
            ev.CommandKind.BACKFILL,
            ev.Role.POLICY,
            reason=asked.reason,
            window=window,
        )
        return True, {"fires": fires, "command_id": command.command_id}

    async def horizon(self, principal: Principal, trigger_id: str, value: int) -> StoredTrigger:
        """The next version with ``policies.horizon_s`` set (the policy role amends that one
        field; the grants' horizon ceiling applies)."""
        async with self.writing(principal.tenant, trigger_id):
            held = await run_in_threadpool(self.existing, principal.tenant, trigger_id)
            d = held.definition
            current = self.out(held)
            for name in REPORTED:
                current.pop(name, None)
            current["policies"]["horizon_s"] = value
            amended = self.parse(
                principal,
                current,
                trigger_id=trigger_id,
                version=d.version + 1,
                state=d.state.value,
                role=ev.Role.POLICY,
            )
            self.authorize(principal, amended, held, also=frozenset({ev.Role.AUTHOR}))
            return await self.publish(amended, held)

    # --- the routes' acts: target ownership -----------------------------------------------
    async def verification(self, tenant: str, url: str) -> dict[str, Any]:
        """A new challenge for ``url``'s host: where to serve what."""
        made = await self.challenge(tenant, url)
        answer = "hex HMAC-SHA256(one of the tenant's webhook secrets, "
        answer += f"'horae-verification:{tenant}:{made.host}:{made.token}')"
        shown: dict[str, Any] = json_text(
            {
                "host": made.host,
                "challenge": made.token,
                "well_known_url": made.well_known_url,
                "expires_at": made.expires_at,
                "answer": answer,
            }
        )
        return shown

    async def verification_check(self, tenant: str, host: str) -> dict[str, Any]:
        """The host's challenge checked now: verified (and until when) or failed, and why."""
        ok, why, until = await self.check_challenge(tenant, host)
        shown: dict[str, Any] = json_text(
            {
                "host": host.lower(),
                "state": "verified" if ok else "failed",
                "detail": why,
                "verified_until": until,
            }
        )
        return shown

    # --- the routes' acts: platform -------------------------------------------------------
    def tenants(self) -> dict[str, Any]:
        """Every tenant with a key, and its whole grant (every field of
        :class:`~horae.contracts.grants.TenantGrant`, the platform defaults filled in)."""
        grants = self.settings.grants()
        return {
            "items": [
                {"tenant": tenant, "grant": asdict(grants.grant(tenant))}
                for tenant in sorted(self.settings.tenant_keys)
            ]
        }

    def known_tenant(self, tenant: str) -> None:
        """404 unless ``tenant`` has a key."""
        if tenant not in self.settings.tenant_keys:
            raise not_found(f"tenant {tenant!r}")

    async def suspension(
        self, principal: Principal, tenant: str, asked: SuspensionIn
    ) -> ev.Command:
        """Suspend or resume every trigger of ``tenant``: the platform-signed tenant command,
        produced to every partition of the commands topic (503 when it cannot be signed or was
        not acknowledged)."""
        kind = ev.CommandKind.PAUSE if asked.suspended else ev.CommandKind.RESUME
        reason = f"{principal.actor}: {asked.reason or ''}".strip(": ")
        try:
            key_id, key = self.settings.platform_signer()
            command = signing.tenant_command(
                tenant,
                kind,
                reason,
                self.clock(),
                key_id=key_id,
                key=key,
                ttl_s=self.settings.command_max_ttl_s,
            )
        except ValueError as exc:
            raise ApiError(503, "Not configured", str(exc)) from None
        checked(command)
        try:
            await self.sink.put_command(command, every_partition=True)
        except Exception as exc:
            raise ApiError(503, "Unavailable", f"the command was not acknowledged: {exc}") from None
        return command

    # --- the routes' acts: service --------------------------------------------------------
    def broken(self) -> dict[str, str]:
        """What the sink and the history source say is wrong with them (empty: ready)."""
        checks = (("kafka", self.sink.problem()), ("postgres", self.history.problem()))
        return {name: p for name, p in checks if p}


def newer(mine: StoredTrigger, shown: str | None) -> StoredTrigger:
    """A version the API wrote, newer than the projection's (whose shown state is ``shown``):
    its own state, except that a tenant's suspension still holds (a new version does not lift
    it; a pause, a resume or a completion of the older version no longer governs)."""
    if shown == "suspended" and mine.definition.state is not ev.DefinitionState.DELETED:
        return replace(mine, state="suspended")
    return mine


def occurrence_rows(d: ev.TriggerDefinition, instants: list[int]) -> list[dict[str, Any]]:
    """Next-instant rows: UTC, local time, offset, DST note and the planner's jitter."""
    spec: TriggerSpec = trigger_spec(d)
    schedule = spec.schedule()
    key = ev.trigger_key(d.tenant, d.trigger_id)
    rows = []
    inner = schedule.inner if isinstance(schedule, BoundedSchedule) else schedule  # DST notes
    for occ in occurrences(inner, instants):
        jitter = 0
        if spec.jitter.max_ms > 0:
            jitter = spec.jitter.offset(key, occ.utc, schedule.next_after(occ.utc))
        sign = "-" if occ.offset_s < 0 else "+"
        hours, rest = divmod(abs(occ.offset_s), 3600)
        rows.append(
            {
                "utc": occ.utc_text,
                "local": occ.local_text,
                "offset": f"{sign}{hours:02d}:{rest // 60:02d}",
                "dst_note": occ.dst,
                "jitter_ms": jitter,
            }
        )
    return rows


def upcoming(d: ev.TriggerDefinition, after: int, n: int) -> list[dict[str, Any]]:
    try:
        instants = next_instants(trigger_spec(d).schedule(), after, n)
    except ValidationError as exc:
        raise invalid(exc.field, exc.message) from None
    return occurrence_rows(d, instants)


def compare(
    current: ev.TriggerDefinition, proposed: ev.TriggerDefinition, start: int, end: int
) -> dict[str, Any]:
    """What-if over ``[start, end)``: both instant lists and the difference."""
    try:
        result = what_if(
            trigger_spec(current).schedule(), trigger_spec(proposed).schedule(), start, end, 1000
        )
    except ValidationError as exc:
        raise invalid(exc.field if exc.field != "end" else "to", exc.message) from None
    out = result.to_dict()
    return {
        "current": out["a"],
        "proposed": out["b"],
        "added": out["only_b"],
        "removed": out["only_a"],
        "truncated": out["truncated"],
    }


def backfill_cost(d: ev.TriggerDefinition, start: int, end: int, ceiling: int) -> tuple[int, bool]:
    """(fires in ``[start, end)`` counted up to ``ceiling`` + 1, whether it exceeds ``ceiling``)."""
    try:
        page = instants_between(trigger_spec(d).schedule(), start, end, ceiling + 1)
    except ValidationError as exc:
        raise invalid(exc.field if exc.field != "end" else "to", exc.message) from None
    return len(page.instants), len(page.instants) > ceiling
