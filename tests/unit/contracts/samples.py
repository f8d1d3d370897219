"""One fully populated sample per event contract (shared by the contract tests)."""

from __future__ import annotations

from datetime import UTC, datetime

from horae.contracts import events as ev

T0 = datetime(2025, 3, 30, 7, 0, tzinfo=UTC)
T1 = datetime(2025, 3, 30, 7, 0, 1, 250_000, tzinfo=UTC)
FIRE_KEY = "acme/nightly/2025-03-30T07:00:00Z/0/scheduled"


def definition(tenant: str = "acme", trigger_id: str = "nightly") -> ev.TriggerDefinition:
    return ev.TriggerDefinition(
        tenant=tenant,
        trigger_id=trigger_id,
        version=3,
        state=ev.DefinitionState.LIVE,
        recurrence=ev.Recurrence(
            kind=ev.RecurrenceKind.CRON,
            expr="0 9 * * 1-5",
            zone="Africa/Addis_Ababa",
            dst_gap=ev.DstGap.SKIP,
            dst_repeat=ev.DstRepeat.BOTH,
            start=T0,
        ),
        target=ev.Target(
            kind=ev.TargetKind.WEBHOOK,
            url="https://hooks.acme.example/nightly",
            headers={"x-team": "billing"},
            secret_refs=("whsec-2", "whsec-1"),
        ),
        authored_at=T0,
        author="alice@acme",
        payload=b'{"job": "nightly"}',
        policies=ev.Policies(
            misfire=ev.Misfire.FIRE_ALL,
            max_catchup=3,
            overlap=ev.Overlap.BUFFER_ONE,
            jitter_s=30,
            retry=ev.RetryPolicy(max_attempts=7, base_s=0.5, max_s=60.0),
        ),
        quotas=ev.Quotas(max_concurrency=2),
        description="nightly billing run",
        labels={"env": "prod"},
    )


def fire() -> ev.FireRecord:
    return ev.FireRecord(
        fire_key=FIRE_KEY,
        key_hash="9f2c1a7be04d",
        tenant="acme",
        trigger_id="nightly",
        origin=ev.Origin.SCHEDULED,
        scheduled_at=T0,
        sequence=0,
        jitter_ms=1250,
        due_at=T1,
        decided_at=T1,
        state=ev.FireState.SKIPPED,
        trigger_version=3,
        tzdata_version="2025a",
        target_kind=ev.TargetKind.WEBHOOK,
        lane=ev.Lane.ON_TIME,
        cause="skipped: overlap",
        cause_detail="previous fire still running",
    )


def all_samples() -> list[ev.Event]:
    d = definition()
    return [
        d,
        ev.Command(
            command_id="c-1",
            tenant="acme",
            trigger_id="nightly",
            kind=ev.CommandKind.BACKFILL,
            requested_by="bob@acme",
            role=ev.Role.POLICY,
            requested_at=T0,
            backfill_from=datetime(2025, 3, 1, tzinfo=UTC),
            backfill_to=datetime(2025, 3, 2, tzinfo=UTC),
            reason="missed during outage",
        ),
        fire(),
        ev.DispatchOrder(
            fire=fire(),
            target=d.target,
            lane=ev.Lane.RETRY,
            attempt=2,
            not_before=T1,
            payload=d.payload,
            deadline=datetime(2025, 3, 31, 7, tzinfo=UTC),
        ),
        ev.PlannerState(
            tenant="acme",
            trigger_id="nightly",
            trigger_version=3,
            state=ev.DefinitionState.PAUSED,
            updated_at=T1,
            next_instant=datetime(2025, 3, 31, 6, tzinfo=UTC),
            next_sequence=1,
            last_decided=T0,
            last_fire_key=FIRE_KEY,
            paused_since=T1,
        ),
        ev.Attempt(
            fire_key=FIRE_KEY,
            key_hash="9f2c1a7be04d",
            tenant="acme",
            trigger_id="nightly",
            n=1,
            lane=ev.Lane.ON_TIME,
            started_at=T0,
            ended_at=T1,
            transport_result=ev.TransportResult.HTTP_ERROR,
            duration_ms=1250,
            http_status=503,
            error="service unavailable",
            retry_after_s=30.0,
            next_attempt_at=T1,
        ),
        ev.WorkOutcome(
            fire_key=FIRE_KEY,
            key_hash="9f2c1a7be04d",
            tenant="acme",
            trigger_id="nightly",
            state=ev.OutcomeState.SUCCEEDED,
            attempts=2,
            decided_at=T1,
            first_attempt_at=T0,
            last_attempt_at=T1,
            http_status=200,
        ),
        ev.ScheduleEvent(
            event_id="e-1",
            type=ev.ScheduleEventType.TRIGGERED,
            tenant="acme",
            trigger_id="nightly",
            emitted_at=T1,
            trigger_version=3,
            fire_key=FIRE_KEY,
            key_hash="9f2c1a7be04d",
            origin=ev.Origin.SCHEDULED,
            scheduled_at=T0,
            due_at=T1,
            payload=d.payload,
        ),
        ev.Quarantined(
            source_topic="horae.definitions",
            source_partition=4,
            source_offset=1234,
            cause="signature",
            detail="not signed by a key of tenant acme",
            original=b"\x00\x00\x00\x00\x01garbage",
            quarantined_at=T1,
            original_key=b"acme/nightly",
            tenant="acme",
            trigger_id="nightly",
        ),
        ev.AuditEntry(
            audit_id="a-1",
            tenant="acme",
            principal="bob@acme",
            role=ev.Role.POLICY,
            action="backfill.request",
            at=T0,
            allowed=True,
            trigger_id="nightly",
            command_id="c-1",
            detail={"from": "2025-03-01", "to": "2025-03-02"},
        ),
    ]
