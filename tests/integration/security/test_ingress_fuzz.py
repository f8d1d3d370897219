"""The ingress fuzz tier (issue 23, item 3, short profile): nasty definitions, commands and
requests — NUL and other controls, lone surrogates, huge text, deep nesting, odd methods, header
names with CR/LF, odd zones, crons and URLs — sent through the real API (in process, producing to
the real Kafka and reading the real PostgreSQL read models) and straight into Kafka against a real
planner. Every input is refused with a cause (a 4xx problem, or a quarantine record with a cause
and a detail) or accepted; the API never answers 5xx; what the planner accepts keeps the text
rules; and a canary sent after them is decided (the partition moved on).

``HORAE_FUZZ_EXAMPLES`` sets the number of hypothesis examples (default: the short profile)."""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horae.api.adapters import KafkaSink, PostgresHistory
from horae.api.app import create_app
from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import decode, encode
from horae.contracts.textrules import check_definition
from horae.contracts.topics import Topic
from horae.devstack.stack import Endpoints
from horae.kafka.admin import delete_under
from horae.outbound.ssrf import AddressPolicy
from horae.projections import synthetic
from tests.integration.api.test_api_postgres import ROUTER, project
from tests.integration.planner.harness import (
    KEY_ID,
    SECRET,
    TENANT,
    PlannerEnv,
    consumed,
    definition,
    read_all,
)
from tests.unit.api.support import Api, Clock, resolve
from tests.unit.api.support import settings as api_settings
from tests.waiting import wait_until

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

EXAMPLES = int(os.environ.get("HORAE_FUZZ_EXAMPLES", "30"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)

NASTY_TEXT = st.one_of(
    st.sampled_from(
        [
            "ok",
            "",
            "before\x00after",
            "a\nb",
            "\r\n",
            "\x1b[2J",
            "\x7f",
            "\x85",
            "\ud800",
            "x\udcff",
            "caf\u00e9",
            " padded ",
            "\u2028",
            "x" * 5000,
        ]
    ),
    st.text(max_size=12),
)
METHODS = st.sampled_from(
    [
        "POST",
        "GET",
        "PUT",
        "DELETE",
        "post",
        "FOO BAR",
        "CONNECT",
        "TRACE",
        "",
        "GET\r\nX: y",
        "P\x00ST",
        "HEAD",
    ]
)
ZONES = st.sampled_from(
    [
        "UTC",
        "Europe/Berlin",
        "Africa/Addis_Ababa",
        "Mars/Olympus",
        "",
        "../../etc/passwd",
        "UTC\x00",
        "Europe/Berlin\n",
        "x" * 200,
    ]
)
CRONS = st.sampled_from(
    [
        "* * * * *",
        "0 9 * * MON-FRI",
        "61 * * * *",
        "",
        "@every 1s",
        "@hourly",
        "* * * * * * *",
        "0 9 * * *\x00",
        "\ud800",
        "a" * 300,
    ]
)
URLS = st.sampled_from(
    [
        "https://hooks.acme.example/x",
        "http://10.0.0.1/x",
        "ftp://x/",
        "https://hooks.acme.example/\x00",
        "https://[2606:4700::1]/x",
        "https://hooks.acme.example/a b",
        "javascript:alert(1)",
        "",
        "https://hooks.acme.example/" + "p" * 3000,
    ]
)
HEADER_NAMES = st.sampled_from(["x-team", "X-A\r\nInjected", "x a", "", "Host", "x-\x00", "é"])


def deep(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


LABELS = st.one_of(
    st.dictionaries(NASTY_TEXT, NASTY_TEXT, max_size=3),
    st.sampled_from([40, 300]).map(lambda n: {"team": deep(n)}),
)


@st.composite
def nasty_body(draw: st.DrawFn) -> dict[str, Any]:
    """A TriggerIn body (the API's) with nasty values in any of its fields."""
    target: dict[str, Any] = {
        "kind": draw(st.sampled_from(["webhook", "event"])),
        "url": draw(URLS),
        "method": draw(METHODS),
        "headers": draw(st.dictionaries(HEADER_NAMES, NASTY_TEXT, max_size=2)),
        "secret_refs": draw(st.sampled_from([["acme-hook"], [], ["acme-hook\x00"]])),
    }
    if target["kind"] == "event":
        target["topic"] = draw(st.sampled_from(["events.acme", "events.globex", "x\x00"]))
    return {
        "recurrence": {"kind": "cron", "expr": draw(CRONS), "zone": draw(ZONES)},
        "target": target,
        "description": draw(st.one_of(st.none(), NASTY_TEXT)),
        "labels": draw(LABELS),
        "content_type": draw(st.sampled_from(["application/json", "text/plain\r\nX: y", "é"])),
    }


def json_text(value: Any) -> str:
    """JSON of ``value`` at any depth (json.dumps recurses), surrogates escaped."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{json_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(json_text(v) for v in value) + "]"
    return json.dumps(value)


# --- through the API -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def api(stack: Endpoints, module_prefix: str) -> Iterator[Api]:
    """The API in process: the real Kafka (its own prefix, topics made) and PostgreSQL."""
    env = PlannerEnv(stack.kafka_bootstrap, module_prefix)
    env.setup()
    schema = f"fuzz_{module_prefix.strip('.')}"
    project(stack.database_url, schema, [ROUTER.emit(synthetic.definition("acme", "seed"), 0)])
    sink = KafkaSink(stack.kafka_bootstrap, module_prefix)
    history = PostgresHistory(stack.database_url, schema, max_size=2)
    clock = Clock(now=datetime.now(UTC))
    app = create_app(
        api_settings(),
        sink,
        history,
        addresses=AddressPolicy(resolver=resolve),
        clock=clock,
        monotonic=clock.monotonic,
    )
    try:
        yield Api(TestClient(app, raise_server_exceptions=False), None, clock)  # type: ignore[arg-type]
    finally:
        history.close()
        sink.close()
        env.close()
        with psycopg.connect(stack.database_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


REFUSALS = {400, 403, 404, 409, 413, 415, 422}
SEEN: dict[int, int] = {}


@FUZZ
@given(body=nasty_body(), n=st.integers(0, 10**9))
def test_the_api_refuses_or_accepts_and_never_fails(api: Api, body: dict[str, Any], n: int) -> None:
    h = {"Content-Type": "application/json", **api.headers("acme", "author", "read")}
    text = json_text({"trigger_id": f"fz{n}", **body})
    r = api.client.post("/v1/schedules", content=text, headers=h)
    SEEN[r.status_code] = SEEN.get(r.status_code, 0) + 1
    assert r.status_code == 201 or r.status_code in REFUSALS, (r.status_code, r.text, text[:300])
    if r.status_code != 201:
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["detail"], r.text
    r = api.client.post("/v1/dry-run", content=text, headers=h)
    assert r.status_code == 200 or r.status_code in REFUSALS, (r.status_code, r.text)
    value = body["description"] or "x"
    for path in (
        f"/v1/schedules/{quote(value, safe='')}",
        f"/v1/schedules?label={quote('team:' + value, safe='')}",
        f"/v1/schedules/fz{n}/history?state={quote(value, safe='')}",
        f"/v1/schedules?cursor={quote(value, safe='')}",
        f"/v1/fires/{quote(value, safe='')}",
    ):
        if len(path) > 6000:
            continue
        got = api.client.get(path, headers=h)
        assert got.status_code < 500, (path, got.status_code, got.text)


def test_the_api_examples_were_sent_and_both_outcomes_seen() -> None:
    """The fuzz sent its examples, and saw both a refusal and an acceptance (it can fail)."""
    assert sum(SEEN.values()) >= min(EXAMPLES, 10), SEEN
    assert 422 in SEEN, SEEN


# --- straight into Kafka, against the real planner -----------------------------------------


@dataclass
class Sent:
    trigger_id: str
    definition: ev.TriggerDefinition | None  # None: sent as JSON text that cannot be built


def as_definition(trigger_id: str, body: dict[str, Any]) -> ev.TriggerDefinition | None:
    """The signed definition of ``body``, or None when it cannot be built or signed (a value
    the dataclass cannot hold: nested labels, a lone surrogate)."""
    try:
        t = body["target"]
        d = ev.TriggerDefinition(
            tenant=TENANT,
            trigger_id=trigger_id,
            version=1,
            state=ev.DefinitionState.LIVE,
            recurrence=ev.Recurrence(
                ev.RecurrenceKind.CRON,
                expr=body["recurrence"]["expr"],
                zone=body["recurrence"]["zone"],
            ),
            target=ev.Target(
                ev.TargetKind(t["kind"]),
                url=t["url"],
                method=t["method"],
                headers=dict(t["headers"]),
                topic=t.get("topic"),
                secret_refs=tuple(t["secret_refs"]),
            ),
            authored_at=datetime.now(UTC).replace(microsecond=0),
            author="fuzz",
            content_type=body["content_type"],
            description=body["description"],
            labels=dict(body["labels"]),
        )
        if any(not isinstance(v, str) for v in d.labels.values()):
            return None
        return signing.sign(d, KEY_ID, SECRET)
    except (UnicodeEncodeError, ValueError, TypeError):
        return None


@pytest.fixture(scope="module")
def planner(stack: Endpoints) -> Iterator[PlannerEnv]:
    prefix = f"fz{os.urandom(5).hex()}."
    env = PlannerEnv(stack.kafka_bootstrap, prefix)
    env.setup()
    env.start_thread("a")
    try:
        yield env
    finally:
        env.close()
        delete_under(stack.kafka_bootstrap, prefix)


ROUNDS = [0]


@FUZZ
@given(bodies=st.lists(nasty_body(), min_size=5, max_size=5), command_reason=NASTY_TEXT)
def test_the_planner_quarantines_with_a_cause_or_accepts(
    planner: PlannerEnv, bodies: list[dict[str, Any]], command_reason: str
) -> None:
    ROUNDS[0] += 1
    sent: list[Sent] = []
    for i, body in enumerate(bodies):
        trigger_id = f"r{ROUNDS[0]}-{i}"
        d = as_definition(trigger_id, body)
        key = f"{TENANT}/{trigger_id}"
        if d is not None and i % 2 == 0:
            try:
                planner.produce(Topic.DEFINITIONS, key, encode(d))
            except UnicodeEncodeError:
                d = None
        if d is None or i % 2 == 1:  # as JSON, the tenant's other form
            obj = {
                "tenant": TENANT,
                "trigger_id": trigger_id,
                "version": 1,
                "state": "live",
                "authored_at": "2026-01-01T00:00:00Z",
                "author": "fuzz",
                **body,
            }
            if d is not None:
                obj["signature"] = {"key_id": KEY_ID, "value": d.signature.value}  # type: ignore[union-attr]
            planner.produce(Topic.DEFINITIONS, key, json_text(obj).encode())
        sent.append(Sent(trigger_id, d))
    reason_command = ev.Command(
        command_id=f"fz-cmd-{ROUNDS[0]}",
        tenant=TENANT,
        trigger_id="canary",
        kind=ev.CommandKind.MANUAL_RUN,
        requested_by="fuzz",
        role=ev.Role.AUTHOR,
        requested_at=datetime.now(UTC).replace(microsecond=0),
        reason=command_reason,
        expires_at=datetime.now(UTC) + timedelta(minutes=5),
    )
    with contextlib.suppress(UnicodeEncodeError):
        planner.produce(
            Topic.COMMANDS, f"{TENANT}/canary", encode(signing.sign(reason_command, KEY_ID, SECRET))
        )
    canary = f"canary-{ROUNDS[0]}"
    planner.produce(Topic.DEFINITIONS, f"{TENANT}/{canary}", encode(canary_definition(canary)))

    def outcome() -> tuple[dict[str, ev.Quarantined], dict[str, ev.TriggerDefinition]] | None:
        if not consumed(planner, Topic.DEFINITIONS):  # first: what is read below is complete
            return None
        quarantined = {
            q.trigger_id or "": q
            for q in (
                decode(v, ev.Quarantined)
                for _, v in read_all(planner.bootstrap, planner.topic(Topic.QUARANTINE))
                if v
            )
        }
        accepted = {
            a.trigger_id: a
            for a in (
                decode(v, ev.TriggerDefinition)
                for _, v in read_all(planner.bootstrap, planner.topic(Topic.ACCEPTED))
                if v
            )
        }
        if canary not in accepted:
            return None
        return quarantined, accepted

    quarantined, accepted = wait_until(outcome, 60, 0.2, "the canary after the fuzz is accepted")
    unnamed = [q for q in quarantined.values() if not q.trigger_id]  # decoding failed before the id
    for s in sent:
        if s.trigger_id in accepted:
            check_definition(accepted[s.trigger_id])  # what is accepted, the stores can hold
            assert s.trigger_id not in quarantined
        elif s.trigger_id in quarantined:
            q = quarantined[s.trigger_id]
            assert q.cause and q.detail, q
        else:  # refused before its trigger id was read (e.g. JSON nested too deep)
            assert unnamed, f"{s.trigger_id}: neither accepted nor quarantined"
    for q in unnamed:
        assert q.cause and q.detail, q


def canary_definition(trigger_id: str) -> ev.TriggerDefinition:
    return definition(trigger_id, "* * * * * *")
