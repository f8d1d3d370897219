"""Group acts: pause, resume, delete or amend the policies of every trigger a label selector
names, as one audited act (``POST /v1/groups/{act}``).

- **Selection.** The tenant's triggers (its own only: the read models are read under the
  token's tenant) whose latest version holds every pair of the selector
  (:func:`horae.domain.selector.parse_selector`), deleted ones left out, the API's newer
  versions merged in as every list does; at most :data:`MAX_GROUP` (more: 422, nothing done).
- **Dry run first.** ``dry_run: true`` answers the count, how many would change and their ids,
  and does nothing; the CLI asks it before every group act.
- **The same path as one trigger.** Each trigger's change is the act a single route makes: a
  pause or resume is :meth:`Service.command` (a platform-signed command the planner applies
  under its exactly-once handling), a delete :meth:`Service.delete`, a policies change a new
  version through :meth:`Service.publish` (validated by ingress, authorised by the token's roles
  and the tenant's ceilings, ``If-Match``-free but serialised per trigger). An amend keeps the
  state the planner decides a trigger under (``definition.state``, a pause by command
  included), so a group pause is not undone by a later group amend.
- **Idempotent.** A ``request_id`` is required (dry runs aside). Each command's id is derived
  from (tenant, request id, trigger id), so the planner refuses a second one (``replayed``) as
  it refuses any repeated command; a trigger already in the asked state (paused, live, deleted,
  or its policies already the asked ones) is left ``unchanged``; and once the act's audit entry
  is in the read models, the same request answers what was done then (``replayed: true``)
  without acting again, while another act under the same request id is 409.
- **Audited once.** One :class:`~horae.contracts.events.AuditEntry` (action ``group.<act>``,
  the token's subject, id derived from (tenant, request id)) goes to the ``audit`` topic after
  the acts, with the selector, the counts and the changed ids (the first
  :data:`AUDIT_IDS` of them in ``detail``).

A trigger whose own act is refused (403 for a policy above the token's grants, 412 while another
request writes it) is reported in ``failed`` with the problem's status and detail; the others are
done.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC
from typing import Any

from starlette.concurrency import run_in_threadpool

from horae.api.auth import Principal
from horae.api.bodies import GroupIn
from horae.api.ports import ListedTrigger
from horae.api.render import json_text
from horae.api.schemas import REPORTED
from horae.api.service import ApiError, Service, invalid
from horae.contracts import events as ev
from horae.contracts.ids import event_id
from horae.domain.selector import SelectorError, matches, parse_selector, selector_text

#: the acts, by the path's last segment
ACTS = ("pause", "resume", "delete", "policies")
#: the most triggers one group act may name
MAX_GROUP = 1000
#: the changed ids an audit entry's detail lists
AUDIT_IDS = 100
_PAGE = 500
#: the state a trigger is left in by each act (it is ``unchanged`` when already there)
_TARGET = {"pause": "paused", "resume": "live", "delete": "deleted"}


def group_audit_id(tenant: str, request_id: str) -> str:
    """The id of a group act's audit entry: one per (tenant, request id)."""
    return event_id("audit", "group", tenant, request_id)


def group_command_id(kind: ev.CommandKind, tenant: str, request_id: str, trigger_id: str) -> str:
    """The id of a group act's command to one trigger: the same request, the same id."""
    return f"api-group-{kind.value}-{event_id('group', tenant, request_id, trigger_id)}"


def fingerprint(act: str, selector: Mapping[str, str], policies: Mapping[str, Any] | None) -> str:
    """What a request id stands for: the act, the canonical selector and the policies asked."""
    text = json.dumps([act, selector_text(selector), policies], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def selected(service: Service, tenant: str, selector: Mapping[str, str]) -> list[ListedTrigger]:
    """The tenant's triggers (not deleted) whose labels hold ``selector``, by trigger id (422
    above :data:`MAX_GROUP`)."""

    first = next(iter(sorted(selector.items())))
    found: list[ListedTrigger] = []
    cursor: str | None = None
    while True:
        page = service.history.triggers(tenant, limit=_PAGE, cursor=cursor, label=first, state=None)
        for item in service.merged_page(tenant, page.items):
            if item.state != "deleted" and matches(item.labels, selector):
                found.append(item)
        if len(found) > MAX_GROUP:
            raise invalid(
                "selector", f"names more than {MAX_GROUP} triggers: narrow it (nothing was done)"
            )
        cursor = page.next_cursor
        if cursor is None:
            return found


def merged_policies(current: Mapping[str, Any], asked: Mapping[str, Any]) -> dict[str, Any]:
    """``current`` with the fields of ``asked`` set; an object merged field by field
    (``{"retry": {"max_attempts": 3}}`` keeps the other retry fields)."""
    out = dict(current)
    for name, value in asked.items():
        held = out.get(name)
        if isinstance(value, Mapping) and isinstance(held, Mapping):
            out[name] = merged_policies(held, value)
        else:
            out[name] = value
    return out


async def _policies(
    service: Service, principal: Principal, trigger_id: str, asked: Mapping[str, Any]
) -> int | None:
    """The next version of ``trigger_id`` with ``asked`` set in its policies (``None``: they
    already hold those values), as an amend makes it: its run state kept."""
    async with service.writing(principal.tenant, trigger_id):
        held = await run_in_threadpool(service.existing, principal.tenant, trigger_id)
        d = held.definition
        current = service.out(held)
        for name in REPORTED:
            current.pop(name, None)
        merged = merged_policies(current["policies"], asked)
        if merged == current["policies"]:
            return None
        current["policies"] = merged
        amended = service.parse(
            principal, current, trigger_id=trigger_id, version=d.version + 1, state=d.state.value
        )
        service.authorize(principal, amended, held)
        stored = await service.publish(amended, held)
        return stored.definition.version


def _would_change(act: str, item: ListedTrigger) -> bool:
    target = _TARGET.get(act)
    return target is None or item.state != target


async def group_act(service: Service, principal: Principal, act: str, asked: GroupIn) -> Any:
    """Run the group act ``act`` (:data:`ACTS`) as ``asked`` says; the answer's JSON."""

    if act not in ACTS:
        raise ApiError(404, "Not found", f"group act {act!r} not found (one of {list(ACTS)})")
    try:
        selector = parse_selector(asked.selector)
    except SelectorError as exc:
        raise invalid("selector", str(exc)) from None
    if act == "policies":
        if not asked.policies:
            raise invalid("policies", "give the policies fields to set")
    elif asked.policies is not None:
        raise invalid("policies", f"only for /v1/groups/policies, not {act}")
    policies = dict(asked.policies) if asked.policies else None
    shown_selector = selector_text(selector)
    tenant = principal.tenant
    if not asked.dry_run:
        if asked.request_id is None:
            raise invalid("request_id", "required unless dry_run (a repeat must not act twice)")
        done = await run_in_threadpool(
            service.history.audit_entry, tenant, group_audit_id(tenant, asked.request_id)
        )
        if done is not None:
            return _replayed(done, act, fingerprint(act, selector, policies))
    items = await run_in_threadpool(selected, service, tenant, selector)
    changing = [i for i in items if _would_change(act, i)]
    if asked.dry_run:
        return {
            "act": act,
            "selector": shown_selector,
            "dry_run": True,
            "matched": len(items),
            "would_change": len(changing),
            "trigger_ids": [i.trigger_id for i in items],
        }
    assert asked.request_id is not None
    request_id = asked.request_id
    changed: list[dict[str, Any]] = []
    unchanged = [i.trigger_id for i in items if not _would_change(act, i)]
    failed: list[dict[str, Any]] = []
    reason = f"group {act} {request_id}: {asked.reason or shown_selector}"[:1024]
    for item in changing:
        tid = item.trigger_id
        try:
            if act in ("pause", "resume"):
                kind = ev.CommandKind.PAUSE if act == "pause" else ev.CommandKind.RESUME
                await run_in_threadpool(service.existing, tenant, tid)
                command = await service.command(
                    principal, tid, kind, ev.Role.AUTHOR, reason=reason,
                    command_id=group_command_id(kind, tenant, request_id, tid),
                )  # fmt: skip
                changed.append({"trigger_id": tid, "command_id": command.command_id})
            elif act == "delete":
                await service.delete(principal, tid, None)
                changed.append({"trigger_id": tid})
            else:
                assert policies is not None
                version = await _policies(service, principal, tid, policies)
                if version is None:
                    unchanged.append(tid)
                else:
                    changed.append({"trigger_id": tid, "version": version})
        except ApiError as exc:
            failed.append({"trigger_id": tid, "status": exc.status, "detail": exc.detail})
    answer = {
        "act": act,
        "selector": shown_selector,
        "request_id": request_id,
        "dry_run": False,
        "replayed": False,
        "matched": len(items),
        "changed": changed,
        "unchanged": sorted(unchanged),
        "failed": failed,
    }
    await service.put_audit(
        _audit_entry(service, principal, act, request_id, selector, policies, answer)
    )
    return answer


def _audit_entry(
    service: Service,
    principal: Principal,
    act: str,
    request_id: str,
    selector: Mapping[str, str],
    policies: Mapping[str, Any] | None,
    answer: Mapping[str, Any],
) -> ev.AuditEntry:
    ids = [c["trigger_id"] for c in answer["changed"]]
    detail = {
        "request_id": request_id,
        "selector": selector_text(selector),
        "fingerprint": fingerprint(act, selector, policies),
        "matched": str(answer["matched"]),
        "changed": str(len(ids)),
        "unchanged": str(len(answer["unchanged"])),
        "failed": str(len(answer["failed"])),
        "trigger_ids": ",".join(ids[:AUDIT_IDS]),
    }
    if policies is not None:
        detail["policies"] = json.dumps(policies, sort_keys=True)[:1024]
    return ev.AuditEntry(
        audit_id=group_audit_id(principal.tenant, request_id),
        tenant=principal.tenant,
        principal=principal.actor,
        role=ev.Role.AUTHOR,
        action=f"group.{act}",
        at=service.clock().astimezone(UTC),
        allowed=True,
        detail=detail,
    )


def _replayed(done: Mapping[str, Any], act: str, print_: str) -> dict[str, Any]:
    """The answer to a request id already acted on (409 when it stood for another act)."""

    detail = done.get("detail") or {}
    if done.get("action") != f"group.{act}" or detail.get("fingerprint") != print_:
        raise ApiError(409, "Conflict", "request_id was used for another group act: use a new one")
    ids = [t for t in str(detail.get("trigger_ids", "")).split(",") if t]
    return {
        "act": act,
        "selector": detail.get("selector"),
        "request_id": detail.get("request_id"),
        "dry_run": False,
        "replayed": True,
        "matched": int(detail.get("matched", 0)),
        "changed": [{"trigger_id": t} for t in ids],
        "unchanged": [],
        "failed": [],
        "at": json_text(done.get("at")),
    }
