"""The ports of the HTTP API: where it writes (:class:`DefinitionSink`) and what it reads
(:class:`HistorySource`). The real adapters are :mod:`horae.api.adapters` (Kafka through the
client's producer settings; PostgreSQL through :class:`~horae.projections.queries.HistoryQueries`
as the reader role); :mod:`horae.api.memory` holds in-memory ones for tests.

Every read is scoped to one tenant: an adapter never returns another tenant's rows. Rows are
plain dicts of JSON-able values or datetimes (the API renders datetimes as RFC 3339).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from horae.contracts import events as ev

#: What a trigger is doing, as every answer shows it (``TriggerOut.state``): its definition's or
#: command's ``live`` / ``paused``, ``suspended`` while its tenant is, ``completed`` once its
#: recurrence has no instant left (a ``count`` fired, an ``end`` passed), ``deleted``.
SHOWN_STATES = ("live", "paused", "suspended", "completed", "deleted")


@dataclass(frozen=True)
class StoredTrigger:
    """The latest version of a trigger with when it was first and last authored.
    ``definition.state`` is the state the planner decides it under (``live``, ``paused`` or
    ``deleted``, a pause or resume by command included: what an amend keeps); ``state`` what it
    is doing (one of :data:`SHOWN_STATES`; ``None``: the definition's, e.g. a version the API
    just wrote that the read models do not have yet)."""

    definition: ev.TriggerDefinition
    created_at: datetime
    updated_at: datetime
    state: str | None = None

    @property
    def shown(self) -> str:
        """What the trigger is doing (:data:`SHOWN_STATES`)."""
        return self.state or self.definition.state.value


@dataclass(frozen=True)
class ListedTrigger:
    """A trigger as the list shows it: ``body`` is the JSON text of its TriggerOut without
    ``next_instants`` (the answer adds them from ``recurrence`` at the time of asking), rendered
    by the read model itself, so a page needs no definition decoded; ``state``: what it is doing
    (:data:`SHOWN_STATES`)."""

    trigger_id: str
    version: int
    state: str
    labels: Mapping[str, str]
    recurrence: ev.Recurrence
    body: str


@dataclass(frozen=True)
class Page:
    """One page of rows and the opaque cursor of the next (``None``: the last page)."""

    items: list[Any]
    next_cursor: str | None


@dataclass(frozen=True)
class FireStory:
    """One fire with its attempts, the outcome shown (the authoritative one) and every outcome
    reported (the dispatcher's and the target's callbacks, in order)."""

    fire: dict[str, Any]
    attempts: list[dict[str, Any]]
    outcome: dict[str, Any] | None
    outcomes: list[dict[str, Any]]


@dataclass(frozen=True)
class LatenessRow:
    """Lateness of the fires due in a window (ms: a webhook target's first attempt, an event
    target's decision, minus the due time) and the missed count; ``trigger_id`` ``None`` for a
    whole tenant."""

    fires: int
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    missed: int
    trigger_id: str | None = None


class BadCursor(ValueError):
    """A cursor this API did not hand out."""


class BadValue(ValueError):
    """A request value the store cannot hold or compare (PostgreSQL's data errors: a NUL, text
    that is not UTF-8, a cursor's part that is not a timestamp): the request's fault, answered
    422, never a 500. Every adapter raises it for such a value instead of its driver's error."""


class DefinitionSink(Protocol):
    """Where the API's signed definitions and commands go (the definitions and commands
    topics). Each call is a coroutine that returns once the broker acknowledged (without holding
    a thread meanwhile); raises on failure."""

    async def put_definition(self, d: ev.TriggerDefinition) -> None: ...

    async def put_command(self, command: ev.Command, *, every_partition: bool = False) -> None:
        """``every_partition``: a tenant-wide command goes to every partition."""
        ...

    async def put_audit(self, entry: ev.AuditEntry) -> None:
        """An audit entry of an act the API did itself (a group act, a redrive): topic
        ``audit``, keyed by its tenant."""
        ...

    async def put_order(
        self, order: ev.DispatchOrder, partition: int, headers: list[tuple[str, bytes]]
    ) -> None:
        """A redrive's order: topic ``lane.retry``, keyed by its fire key, on ``partition``
        (the dead letter's: the trigger's), with ``headers``."""
        ...

    def problem(self) -> str | None:
        """``None`` when the broker answers, else why not (for ``/readyz``)."""
        ...


class HistorySource(Protocol):
    """The read models (read-only, tenant-scoped). Cursors are opaque; a foreign one raises
    :class:`BadCursor`."""

    def trigger(self, tenant: str, trigger_id: str) -> StoredTrigger | None: ...

    def triggers(
        self,
        tenant: str,
        *,
        limit: int,
        cursor: str | None,
        label: tuple[str, str] | None,
        state: str | None,
    ) -> Page:
        """Latest versions by trigger id (``Page.items``: :class:`ListedTrigger`), only those
        whose shown state (:data:`SHOWN_STATES`) is ``state``; without one deleted triggers are
        left out."""
        ...

    def fires(
        self,
        tenant: str,
        trigger_id: str,
        since: datetime,
        until: datetime,
        states: list[str] | None,
        limit: int,
        cursor: str | None,
    ) -> Page: ...

    def last_fires(
        self, tenant: str, trigger_ids: Sequence[str], before: datetime
    ) -> dict[str, Mapping[str, Any]]:
        """The latest fire (a row as :meth:`fires` gives) scheduled before ``before`` of each of
        ``trigger_ids`` that has one, by trigger id; of ``tenant`` only."""
        ...

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
        """The tenant's fires (rows as :meth:`fires` gives) scheduled in ``[since, until)``,
        across its triggers, by ``(scheduled_at, fire_key)``: only those whose shown state
        (``status``: ``succeeded``, ``failed``, ``dispatching``, ``skipped``, ...) is one of
        ``states``, and those of triggers whose latest version has the label ``label`` (deleted
        ones included). Keyset-paged: a page after the cursor's row, whatever was added
        before it since."""
        ...

    def fire(self, tenant: str, fire_key: str) -> FireStory | None: ...

    def lateness(
        self, tenant: str, since: datetime, until: datetime, trigger_id: str | None
    ) -> tuple[LatenessRow, list[LatenessRow]]:
        """(the summary over the tenant or the one trigger, the rows per trigger)."""
        ...

    def events(self, tenant: str, trigger_id: str, limit: int, cursor: str | None) -> Page: ...

    def audit(
        self, tenant: str, since: datetime, until: datetime, limit: int, cursor: str | None
    ) -> Page: ...

    def audit_entry(self, tenant: str, audit_id: str) -> Mapping[str, Any] | None:
        """One audit entry of ``tenant`` (a row as :meth:`audit` gives) by id; ``None`` when
        there is none or it is another tenant's."""
        ...

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
        """The tenant's dead letters (rows: ``dlq_id``, ``link``, ``trigger_id``, ``fire_key``,
        ``origin``, ``scheduled_at``, ``lane``, ``attempt``, ``cause``, ``dead_at``,
        ``redrive_of``, ``record`` (the DLQ record's value), ``redriven_at``, ``redriven_by``)
        by ``(dead_at, dlq_id)``, keyset-paged: only those with one of ``ids``, of
        ``trigger_id``, of triggers whose latest version has every label of ``labels``, dead in
        ``[since, until)``, whose cause holds ``cause``, in ``state`` (``dead``: never
        redriven; ``redriven``). Of ``tenant`` only, whatever the ids name."""
        ...

    def problem(self) -> str | None:
        """``None`` when the database answers, else why not (for ``/readyz``)."""
        ...


class RecentWrites(Protocol):
    """The versions the API wrote, shared by every API process (read-your-writes, and the
    guard that two processes never produce the same version of a trigger).

    A write first :meth:`claim` s its version, produces, then :meth:`confirm` s it (or
    :meth:`release` s it when the broker did not acknowledge). Reads see confirmed versions
    only, until their ``until``; an unconfirmed claim stops blocking at its own ``until``.
    Times are the caller's clock (``now``), so every process must share one wall clock."""

    def claim(self, stored: StoredTrigger, now: datetime, until: datetime) -> bool:
        """Record ``stored`` unconfirmed; ``False`` (nothing recorded) when a version as high
        is held and has not expired at ``now``: another write got there first."""
        ...

    def confirm(self, tenant: str, trigger_id: str, version: int, until: datetime) -> None:
        """The claimed ``version`` was acknowledged: reads see it until ``until``."""
        ...

    def release(self, tenant: str, trigger_id: str, version: int) -> None:
        """Drop the claim of ``version`` (no-op when another version is held)."""
        ...

    def recent(
        self, tenant: str, trigger_ids: list[str], now: datetime
    ) -> dict[str, StoredTrigger]:
        """The confirmed, unexpired versions held for these triggers of ``tenant``."""
        ...
