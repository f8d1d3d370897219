"""In-memory adapters of the API's ports (:mod:`horae.api.ports`), for tests and the OpenAPI
fuzzing: :class:`MemoryBackend` is both the sink and the history source. With
``auto_project`` every accepted definition is visible at once; without it, definitions wait in
``pending`` until :meth:`MemoryBackend.project` (a lagging projector). What the planner applied
beyond the definitions is set by hand: :meth:`MemoryBackend.applied` (a pause or resume by
command, a completion, for one version) and ``suspended`` (tenants), as the read models'
``trigger_states`` show them."""

from __future__ import annotations

import base64
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from horae.api.ports import BadCursor, FireStory, LatenessRow, Page, StoredTrigger
from horae.api.render import listed
from horae.contracts import events as ev


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"m{offset}".encode()).decode()


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    try:
        text = base64.urlsafe_b64decode(cursor.encode()).decode()
        if not text.startswith("m"):
            raise ValueError
        return int(text[1:])
    except ValueError:
        raise BadCursor("malformed cursor") from None


def _page(rows: list[Any], limit: int, cursor: str | None) -> Page:
    start = _offset(cursor)
    items = rows[start : start + limit]
    more = start + limit < len(rows)
    return Page(items, _cursor(start + limit) if more else None)


def _keyset_cursor(at: datetime, key: str) -> str:
    text = json.dumps(["k", at.isoformat(), key])
    return base64.urlsafe_b64encode(text.encode()).decode()


def _after(cursor: str | None) -> tuple[datetime, str] | None:
    """The row a keyset cursor points after (the search's: a page after the cursor's row, as
    the read model's)."""
    if cursor is None:
        return None
    try:
        tag, at, key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if tag != "k" or not isinstance(key, str):
            raise ValueError
        return datetime.fromisoformat(at), key
    except (ValueError, TypeError):
        raise BadCursor("malformed cursor") from None


MISSED = frozenset({"skipped", "expired", "shed", "rejected"})


@dataclass
class MemoryBackend:
    auto_project: bool = True
    definitions: list[ev.TriggerDefinition] = field(default_factory=list)
    commands: list[tuple[ev.Command, bool]] = field(default_factory=list)
    pending: list[ev.TriggerDefinition] = field(default_factory=list)
    stored: dict[tuple[str, str], StoredTrigger] = field(default_factory=dict)
    fire_rows: list[dict[str, Any]] = field(default_factory=list)
    attempt_rows: list[dict[str, Any]] = field(default_factory=list)
    event_rows: list[dict[str, Any]] = field(default_factory=list)
    audit_rows: list[dict[str, Any]] = field(default_factory=list)
    #: dead letters as the read model holds them (rows of :meth:`dead_letters`)
    dead_letter_rows: list[dict[str, Any]] = field(default_factory=list)
    #: the redrive orders produced: (order, partition, headers)
    orders: list[tuple[ev.DispatchOrder, int, list[tuple[str, bytes]]]] = field(
        default_factory=list
    )
    #: the audit entries produced (also projected into ``audit_rows`` at once)
    audits: list[ev.AuditEntry] = field(default_factory=list)
    down: str | None = None
    #: (tenant, trigger id) -> (version, "paused" | "live" | "completed") the planner applied
    runs: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    suspended: set[str] = field(default_factory=set)

    def applied(self, tenant: str, trigger_id: str, state: str) -> None:
        """The planner applied ``state`` (a pause or resume command: ``paused`` / ``live``; a
        completion: ``completed``) to the trigger's current version."""
        held = self.stored[(tenant, trigger_id)]
        self.runs[(tenant, trigger_id)] = (held.definition.version, state)

    def _shown(self, s: StoredTrigger) -> StoredTrigger:
        """``s`` as ``trigger_states`` shows it: run state and shown state."""
        d = s.definition
        if d.state is ev.DefinitionState.DELETED:
            return replace(s, state="deleted")
        run = self.runs.get((d.tenant, d.trigger_id))
        state = d.state.value
        if run is not None and run[0] >= d.version:
            if run[1] in ("paused", "live"):
                d = replace(d, state=ev.DefinitionState(run[1]))
                state = run[1]
            elif state == "live":
                state = run[1]
        if d.tenant in self.suspended:
            state = "suspended"
        return StoredTrigger(d, s.created_at, s.updated_at, state)

    # --- sink -----------------------------------------------------------------------------
    async def put_definition(self, d: ev.TriggerDefinition) -> None:
        if self.down:
            raise ConnectionError(self.down)
        self.definitions.append(d)
        self.pending.append(d)
        if self.auto_project:
            self.project()

    async def put_command(self, command: ev.Command, *, every_partition: bool = False) -> None:
        if self.down:
            raise ConnectionError(self.down)
        self.commands.append((command, every_partition))

    async def put_audit(self, entry: ev.AuditEntry) -> None:
        if self.down:
            raise ConnectionError(self.down)
        self.audits.append(entry)
        row = {f: getattr(entry, f) for f in entry.__dataclass_fields__}
        self.audit_rows.append({**row, "role": entry.role.value, "detail": dict(entry.detail)})

    async def put_order(
        self, order: ev.DispatchOrder, partition: int, headers: list[tuple[str, bytes]]
    ) -> None:
        if self.down:
            raise ConnectionError(self.down)
        self.orders.append((order, partition, headers))

    def problem(self) -> str | None:
        return self.down

    def project(self) -> None:
        """Apply the pending definitions (highest version wins, as the projection does)."""
        for d in self.pending:
            key = (d.tenant, d.trigger_id)
            held = self.stored.get(key)
            if held is None:
                self.stored[key] = StoredTrigger(d, d.authored_at, d.authored_at)
            elif d.version > held.definition.version:
                self.stored[key] = StoredTrigger(d, held.created_at, d.authored_at)
        self.pending.clear()

    # --- history --------------------------------------------------------------------------
    def trigger(self, tenant: str, trigger_id: str) -> StoredTrigger | None:
        held = self.stored.get((tenant, trigger_id))
        return None if held is None else self._shown(held)

    def triggers(
        self,
        tenant: str,
        *,
        limit: int,
        cursor: str | None,
        label: tuple[str, str] | None,
        state: str | None,
    ) -> Page:
        rows = [
            s
            for s in (self._shown(s) for (t, _), s in sorted(self.stored.items()) if t == tenant)
            if (s.shown == state if state else s.shown != "deleted")
            and (label is None or s.definition.labels.get(label[0]) == label[1])
        ]
        return _page([listed(s) for s in rows], limit, cursor)

    def fires(
        self,
        tenant: str,
        trigger_id: str,
        since: datetime,
        until: datetime,
        states: list[str] | None,
        limit: int,
        cursor: str | None,
    ) -> Page:
        rows = sorted(
            (
                r
                for r in self.fire_rows
                if r["tenant"] == tenant
                and r["trigger_id"] == trigger_id
                and since <= r["scheduled_at"] < until
                and (not states or r["state"] in states or r.get("status") in states)
            ),
            key=lambda r: (r["scheduled_at"], r["fire_key"]),
        )
        return _page(rows, limit, cursor)

    def last_fires(
        self, tenant: str, trigger_ids: Sequence[str], before: datetime
    ) -> dict[str, Mapping[str, Any]]:
        last: dict[str, Mapping[str, Any]] = {}
        wanted = set(trigger_ids)
        for r in sorted(self.fire_rows, key=lambda r: (r["scheduled_at"], r["fire_key"])):
            if r["tenant"] == tenant and r["trigger_id"] in wanted and r["scheduled_at"] < before:
                last[r["trigger_id"]] = r
        return last

    def search_fires(
        self,
        tenant: str,
        since: datetime,
        until: datetime,
        states: list[str] | None,
        label: tuple[str, str] | None,
        limit: int,
        cursor: str | None,
    ) -> Page:
        chosen: set[str] | None = None
        if label is not None:
            chosen = {
                t
                for (owner, t), s in self.stored.items()
                if owner == tenant and s.definition.labels.get(label[0]) == label[1]
            }
        rows = sorted(
            (
                r
                for r in self.fire_rows
                if r["tenant"] == tenant
                and r.get("scheduled_at") is not None
                and since <= r["scheduled_at"] < until
                and (not states or r.get("status") in states)
                and (chosen is None or r["trigger_id"] in chosen)
            ),
            key=lambda r: (r["scheduled_at"], r["fire_key"]),
        )
        after = _after(cursor)
        if after is not None:
            rows = [r for r in rows if (r["scheduled_at"], r["fire_key"]) > after]
        more = len(rows) > limit
        page = rows[:limit]
        last = page[-1] if page else None
        token = _keyset_cursor(last["scheduled_at"], last["fire_key"]) if more and last else None
        return Page(page, token)

    def fire(self, tenant: str, fire_key: str) -> FireStory | None:
        for r in self.fire_rows:
            if r["tenant"] == tenant and r["fire_key"] == fire_key:
                attempts = [a for a in self.attempt_rows if a["fire_key"] == fire_key]
                return FireStory(r, attempts, None, [])
        return None

    def lateness(
        self, tenant: str, since: datetime, until: datetime, trigger_id: str | None
    ) -> tuple[LatenessRow, list[LatenessRow]]:
        rows = [
            r
            for r in self.fire_rows
            if r["tenant"] == tenant
            and since <= r["due_at"] < until
            and (trigger_id is None or r["trigger_id"] == trigger_id)
        ]

        def summary(group: list[dict[str, Any]], tid: str | None) -> LatenessRow:
            late = sorted(r["lateness_ms"] for r in group if r.get("lateness_ms") is not None)
            q = statistics.quantiles(late, n=100, method="inclusive") if len(late) > 1 else late
            return LatenessRow(
                fires=len(late),
                p50_ms=statistics.median(late) if late else None,
                p99_ms=(q[98] if len(late) > 1 else late[0]) if late else None,
                max_ms=max(late) if late else None,
                missed=sum(1 for r in group if r["state"] in MISSED),
                trigger_id=tid,
            )

        per = [
            summary([r for r in rows if r["trigger_id"] == tid], tid)
            for tid in sorted({r["trigger_id"] for r in rows})
        ]
        return summary(rows, trigger_id), per

    def events(self, tenant: str, trigger_id: str, limit: int, cursor: str | None) -> Page:
        rows = [
            r for r in self.event_rows if r["tenant"] == tenant and r["trigger_id"] == trigger_id
        ]
        return _page(sorted(rows, key=lambda r: (r["emitted_at"], r["event_id"])), limit, cursor)

    def audit(
        self, tenant: str, since: datetime, until: datetime, limit: int, cursor: str | None
    ) -> Page:
        rows = [r for r in self.audit_rows if r["tenant"] == tenant and since <= r["at"] < until]
        return _page(sorted(rows, key=lambda r: (r["at"], r["audit_id"])), limit, cursor)

    def audit_entry(self, tenant: str, audit_id: str) -> Mapping[str, Any] | None:
        return next(
            (r for r in self.audit_rows if r["tenant"] == tenant and r["audit_id"] == audit_id),
            None,
        )

    def dead_letters(
        self,
        tenant: str,
        *,
        ids: Sequence[str] | None,
        trigger_id: str | None,
        labels: Mapping[str, str] | None,
        since: datetime | None,
        until: datetime | None,
        cause: str | None,
        state: str | None,
        limit: int,
        cursor: str | None,
    ) -> Page:
        chosen: set[str] | None = None
        if labels:
            chosen = {
                t
                for (owner, t), s in self.stored.items()
                if owner == tenant
                and all(s.definition.labels.get(k) == v for k, v in labels.items())
            }
        redriven = {
            str(r["detail"].get("dlq")): r
            for r in sorted(self.audit_rows, key=lambda r: r["at"], reverse=True)
            if r["tenant"] == tenant and r["action"] == "dlq.redrive"
        }
        rows = []
        for r in sorted(self.dead_letter_rows, key=lambda r: (r["dead_at"], r["dlq_id"])):
            done = redriven.get(r["link"])
            if not (
                r["tenant"] == tenant
                and (ids is None or r["dlq_id"] in ids)
                and (trigger_id is None or r["trigger_id"] == trigger_id)
                and (chosen is None or r["trigger_id"] in chosen)
                and (since is None or r["dead_at"] >= since)
                and (until is None or r["dead_at"] < until)
                and (not cause or cause in r["cause"])
                and (state is None or (state == "redriven") == (done is not None))
            ):
                continue
            rows.append(
                {
                    **r,
                    "redriven_at": done["at"] if done else None,
                    "redriven_by": done["principal"] if done else None,
                }
            )
        after = _after(cursor)
        if after is not None:
            rows = [r for r in rows if (r["dead_at"], r["dlq_id"]) > after]
        more = len(rows) > limit
        page = rows[:limit]
        last = page[-1] if page else None
        token = _keyset_cursor(last["dead_at"], last["dlq_id"]) if more and last else None
        return Page(page, token)


@dataclass
class MemoryRecentWrites:
    """A :class:`~horae.api.ports.RecentWrites` in this process (one API process, tests)."""

    held: dict[tuple[str, str], tuple[StoredTrigger, bool, datetime]] = field(default_factory=dict)

    def claim(self, stored: StoredTrigger, now: datetime, until: datetime) -> bool:
        d = stored.definition
        key = (d.tenant, d.trigger_id)
        prior = self.held.get(key)
        if prior is not None and prior[0].definition.version >= d.version and prior[2] > now:
            return False
        self.held[key] = (stored, False, until)
        if len(self.held) > 100_000:
            self.held.pop(next(iter(self.held)))
        return True

    def confirm(self, tenant: str, trigger_id: str, version: int, until: datetime) -> None:
        prior = self.held.get((tenant, trigger_id))
        if prior is not None and prior[0].definition.version == version:
            self.held[(tenant, trigger_id)] = (prior[0], True, until)

    def release(self, tenant: str, trigger_id: str, version: int) -> None:
        prior = self.held.get((tenant, trigger_id))
        if prior is not None and prior[0].definition.version == version:
            del self.held[(tenant, trigger_id)]

    def recent(
        self, tenant: str, trigger_ids: list[str], now: datetime
    ) -> dict[str, StoredTrigger]:
        out = {}
        for trigger_id in trigger_ids:
            held = self.held.get((tenant, trigger_id))
            if held is not None and held[1] and held[2] > now:
                out[trigger_id] = held[0]
        return out
