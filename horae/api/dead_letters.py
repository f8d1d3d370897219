"""A tenant's dead letters: list, inspect, redrive (``/v1/dead-letters``).

A dead letter is a fire the dispatcher gave up on (its attempts exhausted, a final refusal, an
order it could not send): the record the dispatcher wrote to the ``dlq`` topic, with its cause.

- **Read model, not the topic.** The projector keeps the ``dead_letters`` table
  (``sql/migrations/0007_dead_letters.sql``) from the ``dlq`` topic, its rows and its offsets in
  one transaction like every read model, so a list is an indexed keyset range of the tenant's own
  rows (``(tenant, dead_at, dlq_id)``, ``(tenant, trigger_id, dead_at, dlq_id)``) and the
  API needs no read access to the topic. Reading the topic per request (as the platform's
  ``horae dlq list`` does) would read every tenant's records to answer one, unindexed, and
  its time grows with the topic's retention.
- **Tenant-scoped.** Every read names the token's tenant; an id of another tenant's dead letter
  is 404 as an absent one, and a selector or trigger id only ever ranges over the tenant's own
  rows (so another tenant's dead letters are never counted, listed or sent).
- **Redrive** (author role): the dead letters ``ids`` names, or those the list's filters select
  (at least one filter; ``state`` defaults to ``dead``: never redriven), at most
  :data:`MAX_REDRIVE`; ``dry_run`` answers the count and ids first and does nothing. Each is
  sent again as :func:`horae.streams.dispatcher.redrive.redrive_order` makes it (the platform's
  redrive): the same fire key, on the retry lane and the dead letter's partition (its
  trigger's), attempt = the dead attempt + 1, a fresh attempt budget, and the header
  ``horae-redrive-of: <dlq topic>:<partition>:<offset>`` every record of the redriven attempts
  carries (the lineage: a redriven fire that dies again is a dead letter whose ``redrive_of``
  is the first one's id). Each redrive is audited (action ``dlq.redrive``, the token's
  subject, role ``author``, the fire key, the dead letter and the request id), and that entry
  marks the dead letter ``redriven`` in the read model.
- **A request id** is required to redrive: a dead letter's audit id is derived from (it, the
  request id), so the entry is recorded once however often the request is repeated; once
  projected, the dead letter is ``redriven`` and a repeat selecting ``dead`` ones finds none.
  A repeat before the projector caught up may send the fire once more (under the same key: the
  target deduplicates on it, as for any at-least-once delivery).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from starlette.concurrency import run_in_threadpool

from horae.api.auth import Principal
from horae.api.bodies import RedriveIn
from horae.api.render import json_text
from horae.api.service import ApiError, Service, invalid, not_found
from horae.contracts import events as ev
from horae.contracts.codec import DecodeError, default_codec
from horae.contracts.ids import event_id
from horae.domain.selector import SelectorError, parse_selector
from horae.streams.dispatcher.redrive import DlqEntry, redrive_order

#: the most dead letters one redrive may send
MAX_REDRIVE = 1000
STATES = ("dead", "redriven")
_PAGE = 500


@dataclass(frozen=True)
class Filters:
    """What selects dead letters (every one given must hold)."""

    ids: list[str] | None = None
    trigger_id: str | None = None
    selector: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    cause: str | None = None
    state: str | None = None

    def labels(self) -> dict[str, str] | None:
        if self.selector is None:
            return None
        try:
            return parse_selector(self.selector)
        except SelectorError as exc:
            raise invalid("selector", str(exc)) from None

    def check(self) -> None:
        if self.state is not None and self.state not in STATES:
            raise invalid("state", f"one of {', '.join(STATES)}")
        if self.since and self.until and self.until < self.since:
            raise invalid("to", "before from")


def _id_of(link: str | None) -> str | None:
    """The dead-letter id of a link ``<topic>:<partition>:<offset>``."""
    if not link:
        return None
    try:
        _, partition, offset = _link(link)
    except ValueError:
        return None
    return f"{partition}-{offset}"


def shown(row: Mapping[str, Any]) -> dict[str, Any]:
    """A dead letter as the API shows it."""
    out: dict[str, Any] = json_text(
        {
            "id": row["dlq_id"],
            "trigger_id": row["trigger_id"],
            "fire_key": row["fire_key"],
            "origin": row["origin"],
            "scheduled_at": row["scheduled_at"],
            "lane": row["lane"],
            "attempts": row["attempt"],
            "cause": row["cause"],
            "dead_at": row["dead_at"],
            "redrive_of": _id_of(row.get("redrive_of")),
            "state": "redriven" if row.get("redriven_at") is not None else "dead",
            "redriven_at": row.get("redriven_at"),
            "redriven_by": row.get("redriven_by"),
        }
    )
    return out


def _order(row: Mapping[str, Any]) -> ev.DispatchOrder:
    try:
        return default_codec().decode(bytes(row["record"]), ev.DispatchOrder)
    except DecodeError as exc:
        raise ApiError(
            409, "Conflict", f"dead letter {row['dlq_id']!r} cannot be decoded: {exc.detail}"
        ) from None


def _aware(value: datetime | None) -> datetime | None:
    """An instant in UTC (one without a zone is taken as UTC)."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _page(
    service: Service, tenant: str, f: Filters, limit: int, cursor: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    f = replace(f, since=_aware(f.since), until=_aware(f.until))
    f.check()
    page = service._page(
        lambda: service.history.dead_letters(
            tenant, ids=f.ids, trigger_id=f.trigger_id, labels=f.labels(), since=f.since,
            until=f.until, cause=f.cause, state=f.state, limit=limit, cursor=cursor,
        ),
        cursor=cursor,
    )  # fmt: skip
    return list(page.items), page.next_cursor


def listing(
    service: Service, tenant: str, f: Filters, limit: int, cursor: str | None
) -> dict[str, Any]:
    """A page of the tenant's dead letters, oldest death first."""
    rows, after = _page(service, tenant, f, limit, cursor)
    return {"items": [shown(r) for r in rows], "next_cursor": after}


def inspect(service: Service, tenant: str, dlq_id: str) -> dict[str, Any]:
    """One dead letter with the order it holds (404 when absent or another tenant's)."""
    rows, _ = _page(service, tenant, Filters(ids=[dlq_id]), 1, None)
    if not rows:
        raise not_found(f"dead letter {dlq_id!r}")
    row = rows[0]
    order = _order(row)
    target = order.target
    answer = shown(row)
    answer["order"] = json_text(
        {
            "target": {"kind": target.kind.value, "url": target.url, "topic": target.topic},
            "attempt": order.attempt,
            "max_attempts": order.retry.max_attempts,
            "not_before": order.not_before,
            "content_type": order.content_type,
            "payload_bytes": len(order.payload),
        }
    )
    return answer


def _selected(service: Service, tenant: str, f: Filters) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page, cursor = _page(service, tenant, f, _PAGE, cursor)
        rows += page
        if len(rows) > MAX_REDRIVE:
            raise invalid(
                "<body>", f"selects more than {MAX_REDRIVE} dead letters: narrow it (none sent)"
            )
        if cursor is None:
            return rows


def _filters(asked: RedriveIn) -> Filters:
    def at(value: int | None) -> datetime | None:
        return None if value is None else datetime.fromtimestamp(value, UTC)

    given = (asked.ids, asked.trigger_id, asked.selector, asked.since, asked.until, asked.cause)
    if all(v is None for v in given):
        raise invalid(
            "<body>", "name the dead letters: ids, or trigger_id, selector, from, to or cause"
        )
    if asked.ids is not None and not asked.ids:
        raise invalid("ids", "empty: name at least one dead letter")
    return Filters(
        ids=list(asked.ids) if asked.ids is not None else None,
        trigger_id=asked.trigger_id,
        selector=asked.selector,
        since=at(asked.since),
        until=at(asked.until),
        cause=asked.cause,
        state=asked.state or ("dead" if asked.ids is None else None),
    )


def redrive_audit_id(link: str, request_id: str) -> str:
    """The audit id of a tenant's redrive of the dead letter at ``link`` under ``request_id``."""
    return event_id("audit", "dlq.redrive", link, request_id)


async def redrive(service: Service, principal: Principal, asked: RedriveIn) -> dict[str, Any]:
    """Dry run: the count and ids; else each dead letter sent again and audited (see the module
    docstring)."""
    f = _filters(asked)
    tenant = principal.tenant
    rows = await run_in_threadpool(_selected, service, tenant, f)
    if asked.ids is not None:
        missing = sorted(set(asked.ids) - {r["dlq_id"] for r in rows})
        if missing:
            raise not_found(f"dead letter {missing[0]!r}")
    ids = [r["dlq_id"] for r in rows]
    if asked.dry_run:
        return {"dry_run": True, "matched": len(rows), "ids": ids}
    if asked.request_id is None:
        raise invalid("request_id", "required unless dry_run")
    request_id = asked.request_id
    now = service.clock().astimezone(UTC)
    sent = []
    for row in rows:
        dead = _order(row)
        if dead.fire.tenant != tenant:  # the read model is tenant-scoped: never reached
            raise not_found(f"dead letter {row['dlq_id']!r}")
        topic, partition, offset = _link(row["link"])
        entry = DlqEntry(topic, partition, offset, dead, row["cause"])
        order, carried = redrive_order(entry, now)
        await _produce(service, order, partition, carried.to_headers())
        await service.put_audit(
            ev.AuditEntry(
                audit_id=redrive_audit_id(entry.link, request_id),
                tenant=tenant,
                principal=principal.actor,
                role=ev.Role.AUTHOR,
                action="dlq.redrive",
                at=now,
                allowed=True,
                trigger_id=dead.fire.trigger_id,
                detail={
                    "fire_key": dead.fire.fire_key,
                    "dlq": entry.link,
                    "dead_letter": row["dlq_id"],
                    "cause": row["cause"][:500],
                    "attempt": str(order.attempt),
                    "request_id": request_id,
                },
            )
        )
        sent.append({"id": row["dlq_id"], "fire_key": dead.fire.fire_key, "attempt": order.attempt})
    return {"dry_run": False, "request_id": request_id, "matched": len(rows), "redriven": sent}


def _link(link: str) -> tuple[str, int, int]:
    topic, _, rest = link.rpartition(":")
    topic, _, partition = topic.rpartition(":")
    return topic, int(partition), int(rest)


async def _produce(
    service: Service, order: ev.DispatchOrder, partition: int, headers: list[tuple[str, bytes]]
) -> None:
    try:
        await service.sink.put_order(order, partition, headers)
    except Exception as exc:
        raise ApiError(503, "Unavailable", f"the redrive was not acknowledged: {exc}") from None
