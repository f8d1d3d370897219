"""The soak's checker. Shares no code with the processes: it reads the topics with its own
confluent-kafka consumer (``isolation.level=read_committed``) and its own Avro reader
(:mod:`.avro`, from the ``.avsc`` files), the receiver's log, and the read models with its own SQL.

It proves, for the window of the run:
- every expected instant of every soak trigger has exactly one committed decision (a ``fired`` one,
  or another state with its cause) — ``decisions_lost`` / ``decisions_duplicated``;
- every ``fired`` webhook decision reached the receiver at least once, every call with one key
  (``Idempotency-Key`` = ``webhook-id`` = the fire key), and the receiver's dedup by key gives
  exactly the set of fired webhook decisions; every ``fired`` event decision has its
  ``schedule.triggered`` event in the tenant's events topic;
- the live read models equal a rebuild into a second schema, table by table, row by row
  (``read_model_divergence``).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import Consumer, TopicPartition

from tests.chaos.soak.avro import WireError, WireReader


@dataclass(frozen=True)
class CheckConfig:
    bootstrap: str
    username: str
    password: str
    prefix: str
    database_url: str  # the owner's: reads both schemas
    live_schema: str
    shadow_schema: str
    receiver_log: Path
    triggers: dict[tuple[str, str], str]  # (tenant, trigger) -> "webhook" | "event"
    put_at: float  # when the definitions were produced (unix seconds)
    cutoff: float  # instants up to here must be decided
    start_grace_s: float = 30.0  # from put_at until a trigger must be deciding
    drains: list[float] = field(default_factory=list)  # SIGTERMs of planners (unix seconds)
    dispatcher_drains: list[float] = field(default_factory=list)  # SIGTERMs of dispatchers


def _ts(value: datetime) -> float:
    return value.timestamp()


def read_committed(config: CheckConfig, topic: str, idle_s: float = 3.0) -> list[bytes]:
    """Every committed value of ``topic`` (all partitions, from the beginning)."""
    consumer = Consumer(
        {
            "bootstrap.servers": config.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": config.username,
            "sasl.password": config.password,
            "group.id": "soak-checker",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        if meta.error is not None:
            return []
        tps = [TopicPartition(topic, p, 0) for p in meta.partitions]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=30)[1] for tp in tps}
        consumer.assign(tps)
        values: list[bytes] = []
        done = {p for p, end in ends.items() if end == 0}
        idle = 0.0
        while len(done) < len(ends) and idle < idle_s:
            batch = consumer.consume(5000, timeout=0.5)
            idle = idle + 0.5 if not batch else 0.0
            for msg in batch:
                value, offset, partition = msg.value(), msg.offset(), msg.partition()
                if msg.error() is not None or offset is None or partition is None:
                    continue
                if value is not None:
                    values.append(value)
                if offset + 1 >= ends[partition]:
                    done.add(partition)
        return values
    finally:
        consumer.close()


def records(config: CheckConfig, reader: WireReader, topic: str, name: str) -> list[dict[str, Any]]:
    out = []
    for value in read_committed(config, topic):
        try:
            kind, record = reader.decode(value)
        except WireError:
            continue
        if kind == name:
            out.append(record)
    return out


@dataclass
class Verdict:
    figures: dict[str, Any]
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def check_decisions(config: CheckConfig, fires: list[dict[str, Any]]) -> dict[str, Any]:
    ours = [
        f
        for f in fires
        if (f["tenant"], f["trigger_id"]) in config.triggers and f["origin"] == "scheduled"
    ]
    per_instant = Counter((f["tenant"], f["trigger_id"], _ts(f["scheduled_at"])) for f in ours)
    duplicated = sum(n - 1 for n in per_instant.values() if n > 1)
    keys = Counter(f["fire_key"] for f in ours)
    duplicated_keys = sum(n - 1 for n in keys.values() if n > 1)
    first = int(config.put_at + config.start_grace_s) + 1
    last = int(config.cutoff)
    lost = 0
    lost_samples: list[str] = []
    for tenant, trigger in config.triggers:
        for second in range(first, last + 1):
            if (tenant, trigger, float(second)) not in per_instant:
                lost += 1
                if len(lost_samples) < 5:
                    lost_samples.append(f"{tenant}/{trigger}@{second}")
    states = Counter(f["state"] for f in ours)
    causes = Counter(f"{f['state']}:{f['cause']}" for f in ours if f["state"] != "fired")
    without_cause = sum(1 for f in ours if f["state"] != "fired" and not f["cause"])
    in_window = sum(1 for (_, _, s) in per_instant if first <= s <= last)
    lateness = sorted(_ts(f["decided_at"]) - _ts(f["due_at"]) for f in ours)
    return {
        "instants": in_window,
        "expected_instants": len(config.triggers) * max(0, last - first + 1),
        "decisions": len(ours),
        "decisions_lost": lost,
        "lost_samples": lost_samples,
        "decisions_duplicated": max(duplicated, duplicated_keys),
        "states": dict(states),
        "not_fired_causes": dict(causes),
        "not_fired_without_cause": without_cause,
        "decision_lateness_p50_s": _pct(lateness, 0.50),
        "decision_lateness_p99_s": _pct(lateness, 0.99),
        "decision_lateness_max_s": lateness[-1] if lateness else 0.0,
    }


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    return round(values[min(len(values) - 1, int(q * len(values)))], 3)


def check_deliveries(
    config: CheckConfig, fires: list[dict[str, Any]], events: list[dict[str, Any]]
) -> dict[str, Any]:
    fired = [
        f
        for f in fires
        if (f["tenant"], f["trigger_id"]) in config.triggers and f["state"] == "fired"
    ]
    hooks = {f["fire_key"]: f for f in fired if f["target_kind"] == "webhook"}
    due_hooks = {k for k, f in hooks.items() if _ts(f["scheduled_at"]) <= config.cutoff}
    hits = [json.loads(line) for line in config.receiver_log.read_text().splitlines() if line]
    without_key = sum(1 for h in hits if not h.get("key"))
    two_keys = sum(
        1
        for h in hits
        if h.get("key") and (h.get("webhook_id") != h["key"] or h.get("body_key") != h["key"])
    )
    received = Counter(h["key"] for h in hits if h.get("key"))
    first_seen = sum(1 for h in hits if h.get("first"))
    undelivered = due_hooks - set(received)
    unexpected = set(received) - set(hooks)
    triggered = Counter(
        e["fire_key"]
        for e in events
        if e["type"] == "schedule.triggered" and e.get("fire_key") is not None
    )
    event_fires = {
        f["fire_key"]
        for f in fired
        if f["target_kind"] == "event" and _ts(f["scheduled_at"]) <= config.cutoff
    }
    return {
        "webhook_decisions": len(due_hooks),
        "webhook_calls": len(hits),
        "webhook_redeliveries": len(hits) - len(received),
        "deliveries_lost": len(undelivered) + len(event_fires - set(triggered)),
        "deliveries_without_key": without_key,
        "deliveries_with_two_keys": two_keys,
        "deliveries_unexpected": len(unexpected),
        "receiver_dedup_exact": first_seen == len(received)
        and due_hooks <= set(received) <= set(hooks),
        "event_decisions": len(event_fires),
        "events_duplicated": sum(n - 1 for n in triggered.values() if n > 1),
    }


def check_drains(config: CheckConfig, fires: list[dict[str, Any]]) -> dict[str, Any]:
    """Per SIGTERM at ``t``: the latest decision of an instant due in ``[t, t + 5 s]`` — how long
    the drained member's partitions went undecided."""
    ours = [f for f in fires if (f["tenant"], f["trigger_id"]) in config.triggers]
    gaps = []
    for t in config.drains:
        lates = [
            _ts(f["decided_at"]) - _ts(f["due_at"])
            for f in ours
            if t <= _ts(f["due_at"]) <= t + 5.0
        ]
        gaps.append(round(max(lates), 3) if lates else None)
    measured = [g for g in gaps if g is not None]
    hits = [json.loads(line) for line in config.receiver_log.read_text().splitlines() if line]
    firsts = [(h["t"], datetime.fromisoformat(h["due"]).timestamp()) for h in hits
              if h.get("first") and h.get("due")]  # fmt: skip
    delivery_gaps = []
    for t in config.dispatcher_drains:
        lates = [at - due for at, due in firsts if t <= due <= t + 5.0]
        delivery_gaps.append(round(max(lates), 3) if lates else None)
    return {
        "drains": len(config.drains),
        "drain_handover_s": gaps,
        "drain_handover_max_s": max(measured) if measured else None,
        "dispatcher_drain_handover_s": delivery_gaps,
    }


#: bookkeeping of the schema itself (which migrations ran and when it was made), not projected
BOOKKEEPING = frozenset({"schema_migrations", "projection_meta"})


def _tables(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    rows = conn.execute(
        "SELECT table_name FROM information_schema.tables"
        " WHERE table_schema = %s AND table_type = 'BASE TABLE' ORDER BY table_name",
        (schema,),
    ).fetchall()
    return [str(r[0]) for r in rows if str(r[0]) not in BOOKKEEPING]


def check_read_models(config: CheckConfig, fires: list[dict[str, Any]]) -> dict[str, Any]:
    """Rows (as their whole text) in one schema and not in the other, per table; and the live
    ``fires`` table against the committed fire records."""
    live, shadow = config.live_schema, config.shadow_schema
    per_table: dict[str, int] = {}
    with psycopg.connect(config.database_url, autocommit=True) as conn:
        live_tables, shadow_tables = _tables(conn, live), _tables(conn, shadow)
        for table in sorted(set(live_tables) | set(shadow_tables)):
            if table not in live_tables or table not in shadow_tables:
                per_table[table] = -1
                continue
            lt, st = f'"{live}"."{table}"', f'"{shadow}"."{table}"'
            row = conn.execute(
                f"SELECT (SELECT count(*) FROM (SELECT t::text FROM {lt} t EXCEPT ALL"
                f"   SELECT t::text FROM {st} t) a)"
                f" + (SELECT count(*) FROM (SELECT t::text FROM {st} t EXCEPT ALL"
                f"   SELECT t::text FROM {lt} t) b)"
            ).fetchone()
            per_table[table] = int(row[0]) if row else -1
        counted = conn.execute(f'SELECT count(*) FROM "{live}".fires').fetchone()
    projected = int(counted[0]) if counted else -1
    distinct = len({f["fire_key"] for f in fires})
    divergence = sum(abs(n) for n in per_table.values())
    return {
        "read_model_divergence": divergence + abs(projected - distinct),
        "read_model_tables": per_table,
        "fires_rows": projected,
        "fire_records": distinct,
    }


def check(config: CheckConfig) -> Verdict:
    reader = WireReader()
    fires = records(config, reader, f"{config.prefix}fires", "FireRecord")
    tenants = sorted({t for t, _ in config.triggers})
    events: list[dict[str, Any]] = []
    for tenant in tenants:
        events += records(config, reader, f"{config.prefix}events.{tenant}", "ScheduleEvent")
    figures: dict[str, Any] = {}
    figures.update(check_decisions(config, fires))
    figures.update(check_deliveries(config, fires, events))
    figures.update(check_drains(config, fires))
    figures.update(check_read_models(config, fires))
    problems = []
    for name in (
        "decisions_lost",
        "decisions_duplicated",
        "not_fired_without_cause",
        "deliveries_lost",
        "deliveries_without_key",
        "deliveries_with_two_keys",
        "deliveries_unexpected",
        "events_duplicated",
        "read_model_divergence",
    ):
        if figures[name]:
            problems.append(f"{name} = {figures[name]}")
    if not figures["receiver_dedup_exact"]:
        problems.append("the receiver's dedup by key is not the set of fired webhook decisions")
    if figures["instants"] == 0:
        problems.append("no instant was decided in the window")
    return Verdict(figures, problems)


def by_trigger(fires: list[dict[str, Any]]) -> dict[tuple[str, str], list[float]]:
    """Decided instants per trigger (for the driver's progress checks)."""
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    for f in fires:
        out[(f["tenant"], f["trigger_id"])].append(_ts(f["scheduled_at"]))
    return out
