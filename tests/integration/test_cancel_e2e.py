"""A tenant cancels a fire that is retrying, through the real planner, dispatcher and projector
on the test's broker and PostgreSQL, on one virtual clock: the receiver answers 503, the
dispatcher holds the retry; the cancel command (``cancel_fire_key``, signed by the tenant's key,
as the API and the CLI produce it) reaches the planner, which audits it and writes the cancel
markers; the dispatcher drops the held retry and concludes the fire ``cancelled`` with the
actor; no further attempt arrives, however far the clock moves; the history shows it (the
fire's status, its outcome's cause, the tenant's fire search by state, the audit entry); a
second cancel changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from aiohttp import web

from horae.contracts import events as ev
from horae.contracts.topics import Topic
from horae.domain.keys import FireKey
from horae.ports import WallClock
from horae.projections import schema as pschema
from horae.projections.projector import Projector, ProjectorConfig
from horae.projections.queries import FireDetail, HistoryQueries
from horae.streams.dispatcher.worker import Dispatcher
from tests.integration.dispatcher.support import DispatchEnv, Receiver, dispatching
from tests.integration.planner.harness import (
    HOOK_REF,
    TENANT,
    PlannerEnv,
    command,
    consumed,
    definition,
)
from tests.integration.projections.projection_support import running
from tests.waiting import wait_until

HOUR = 3600
TRIGGER = "flaky"
CAUSE = "cancelled: by alice: the receiver is down for the night"


@pytest.fixture
def schema(database_url: str, unique: str) -> Iterator[str]:
    name = f"cancel_{unique}"
    yield name
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def test_a_retrying_fire_cancelled_gets_no_further_attempt_and_says_who(
    planner_env: PlannerEnv, database_url: str, schema: str
) -> None:
    hour = int(datetime.now(UTC).timestamp()) // HOUR * HOUR
    virtual = [float(hour + 600)]
    clock = WallClock(lambda: virtual[0])
    failing = [True]

    def answer(_path: str, _n: int) -> web.Response | None:
        return web.Response(status=503) if failing[0] else None

    receiver = Receiver(answer)
    receiver.start()
    retry = ev.RetryPolicy(max_attempts=10, base_s=30.0, max_s=30.0, jitter_ratio=0.0)
    target = ev.Target(kind=ev.TargetKind.WEBHOOK, url=receiver.url(), secret_refs=(HOOK_REF,))
    policies = ev.Policies(retry=retry)
    planner_env.put(definition(TRIGGER, "0 * * * *", policies=policies, target=target))
    planner_env.start_thread("a", clock=lambda: virtual[0], max_skew_s=1e9)
    wait_until(lambda: consumed(planner_env, Topic.DEFINITIONS), 60, 0.2, "definition")
    with psycopg.connect(database_url, autocommit=True) as conn:
        pschema.migrate(conn, schema)
    dispatcher = Dispatcher(
        DispatchEnv(planner_env.bootstrap, planner_env.prefix).config(), clock=clock
    )
    projector = Projector(
        ProjectorConfig(
            bootstrap=planner_env.bootstrap,
            database_url=database_url,
            schema=schema,
            topic_prefix=planner_env.prefix,
            batch_ms=100,
            consumer_overrides={"session.timeout.ms": 6000, "heartbeat.interval.ms": 500},
        )
    )
    instant = hour + HOUR
    key = FireKey(TENANT, TRIGGER, instant).canonical()

    def hits() -> int:
        return sum(1 for h in receiver.hits if h.key == key)

    def cancel() -> ev.Command:
        at = datetime.fromtimestamp(virtual[0], UTC)
        c = command(
            TRIGGER,
            ev.CommandKind.PAUSE,
            cancel_fire_key=key,
            requested_by="alice",
            reason="the receiver is down for the night",
            requested_at=at,
            expires_at=at + timedelta(minutes=10),
        )
        planner_env.send(c)
        return c

    try:
        with (
            dispatching(dispatcher),
            running(projector),
            psycopg.connect(database_url, autocommit=True) as conn,
        ):
            queries = HistoryQueries(conn, schema)

            def fire() -> FireDetail | None:
                return queries.fire(TENANT, key)

            def audits() -> list[dict[str, Any]]:
                at = datetime.fromtimestamp(virtual[0], UTC)
                page = queries.audit_entries(TENANT, at - timedelta(days=1), at + timedelta(days=1))
                return [a for a in page.items if a["action"] == "fire.cancel"]

            virtual[0] = instant + 5.0  # due: the first attempt answers 503
            wait_until(lambda: hits() == 1, 60, 0.1, "the first attempt")
            wait_until(lambda: len(dispatcher.admission) == 1, 60, 0.1, "its retry held")
            wait_until(lambda: (d := fire()) and d.attempts, 60, 0.1, "the attempt projected")
            first = cancel()

            def outcome() -> dict[str, Any] | None:
                detail = fire()
                return None if detail is None else detail.outcome

            shown = wait_until(outcome, 60, 0.1, "the cancelled outcome in the history")
            assert shown is not None
            assert (shown["state"], shown["error"], shown["attempts"], shown["source"]) == (
                "cancelled",
                CAUSE,
                1,
                "dispatcher",
            )
            assert len(dispatcher.admission) == 0, "the held retry was dropped"
            detail = fire()
            assert detail is not None and detail.fire["status"] == "cancelled"
            assert [a["n"] for a in detail.attempts] == [1], "the attempt made is kept"
            at = datetime.fromtimestamp(virtual[0], UTC)
            found = queries.search_fires(
                TENANT, at - timedelta(days=1), at + timedelta(days=1), ["cancelled"]
            )
            assert [f["fire_key"] for f in found.items] == [key], "searchable by its state"
            (audit,) = wait_until(audits, 60, 0.1, "the audit entry")
            assert (audit["allowed"], audit["command_id"], audit["trigger_id"]) == (
                True,
                first.command_id,
                TRIGGER,
            )
            assert audit["detail"]["fire_key"] == key
            assert audit["detail"]["requested_by"] == "alice"

            virtual[0] += 600.0  # past every retry the policy would have made
            failing[0] = False
            cancel()  # twice: applied and audited again, and nothing changes
            wait_until(lambda: len(audits()) == 2, 60, 0.1, "the second cancel audited")
            at = datetime.fromtimestamp(virtual[0], UTC)
            manual = command(
                TRIGGER, ev.CommandKind.MANUAL_RUN, requested_at=at.replace(microsecond=0),
                expires_at=at + timedelta(minutes=10),
            )  # fmt: skip
            planner_env.send(manual)  # a later fire of the same trigger, on the same partition
            manual_key = FireKey(
                TENANT, TRIGGER, int(at.timestamp()), 0, ev.Origin.MANUAL
            ).canonical()

            def delivered() -> bool:
                d = queries.fire(TENANT, manual_key)
                return d is not None and d.outcome is not None

            wait_until(delivered, 60, 0.1, "a later fire of the trigger delivered")
            assert hits() == 1, "no further attempt of the cancelled fire arrived"
            detail = fire()
            assert detail is not None
            assert [o["state"] for o in detail.outcomes] == ["cancelled"], "one outcome"
            assert len(dispatcher.admission) == 0
    finally:
        receiver.stop()
