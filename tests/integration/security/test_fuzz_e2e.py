"""The end-to-end fuzz tier (issue 23, item 3): nasty definitions and manual runs through the
real API (in process, on the real Kafka and PostgreSQL) and nasty definitions straight into
Kafka, against a real planner, dispatcher and projector (``horae planner|dispatcher|projector``
subprocesses) with webhook targets at a local receiver, and a stall detector.

Every input is either refused with a cause — a 4xx problem with a detail, or a quarantine record
with a cause and a detail — or it reaches the ledger and the read model: an accepted definition
is listed by the projection at its version, a manual run's fire is decided and projected, a
webhook fire's attempt is recorded (the dispatcher delivered, or failed it with a cause). The API
never answers 5xx. The stall detector samples, twice a second, each consumer's committed
position against the end of what it consumes (the planner's and the dispatcher's consumer groups,
the projector's offsets in PostgreSQL): none may have a backlog that does not move for more than
:data:`STALL_S` seconds, and every round ends with all three caught up.

``HORAE_FUZZ_EXAMPLES`` sets the number of rounds (the short profile in CI: :data:`SHORT`);
``horae chaos --fuzz N`` runs a long profile of N rounds, and ``HORAE_FUZZ_REPORT`` names a JSON
file the counts are written to."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, TopicPartition
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from horae.api.adapters import KafkaSink, PostgresHistory
from horae.api.app import create_app
from horae.api.auth import issue
from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.codec import decode, encode
from horae.contracts.topics import Topic, events_topic, lane_topic, topic_name
from horae.devstack.stack import Endpoints
from horae.kafka.admin import delete_under
from horae.kafka.config import client_config
from horae.kafka.reader import KafkaPartitionReader
from horae.projections.rebuild import end_offsets
from horae.settings import Settings
from tests.integration.planner.harness import read_all
from tests.integration.security.test_ingress_fuzz import (
    CRONS,
    HEADER_NAMES,
    LABELS,
    METHODS,
    NASTY_TEXT,
    ZONES,
    json_text,
)
from tests.net import kill_all
from tests.waiting import wait_until

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

SHORT = 6
EXAMPLES = int(os.environ.get("HORAE_FUZZ_EXAMPLES", str(SHORT)))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    phases=(Phase.explicit, Phase.generate),  # a failing round is reported as it is: no shrinking
)
#: the longest a consumer's backlog may stand still (a poison record's bounded retries included)
STALL_S = float(os.environ.get("HORAE_FUZZ_STALL_S", "20"))
TENANT, KEY_ID, SECRET = "acme", "acme-1", "acme-secret"
WEBHOOK_SECRETS = {TENANT: {"acme-hook": "whsec_aGVsbG8taG9yYWUtd2ViaG9vay1rZXkh"}}
REFUSALS = {400, 403, 404, 409, 413, 415, 422}
COUNTS: Counter[str] = Counter()


# --- the system ----------------------------------------------------------------------------


@dataclass
class System:
    bootstrap: str
    prefix: str
    schema: str
    db: psycopg.Connection[Any]
    api: TestClient
    history: PostgresHistory
    token: str
    receiver: str
    hits: list[str]
    logs: Path
    processes: list[subprocess.Popen[bytes]]

    def topic(self, topic: Topic) -> str:
        return topic_name(topic, self.prefix)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}

    def tail(self) -> str:
        return "".join(
            f"\n--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.logs.glob("*.log"))
        )

    def alive(self) -> None:
        for proc in self.processes:
            assert proc.poll() is None, f"a process exited ({proc.args!r}){self.tail()}"


def _receiver(hits: list[str]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            hits.append(self.command)
            self.send_response(204)
            self.end_headers()

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _any

        def do_HEAD(self) -> None:
            hits.append("HEAD")
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@pytest.fixture(scope="module")
def system(stack: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    """Topics, read models, a planner, a dispatcher and a projector under a prefix of their own,
    the API in process over them, a receiver for the webhook targets."""
    unique = secrets.token_hex(4)
    prefix, schema = f"fe{unique}.", f"fuzz_e2e_{unique}"
    hits: list[str] = []
    receiver = _receiver(hits)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    platform_key, token_key = secrets.token_hex(16), secrets.token_hex(32)
    shared = {
        "tenant_keys": {TENANT: {KEY_ID: SECRET}},
        "platform_key": platform_key,
        "dispatcher": {
            "allow": ["127.0.0.1/32"],
            "webhook_secrets": WEBHOOK_SECRETS,
        },
    }
    env = dict(
        os.environ,
        HORAE_KAFKA_BOOTSTRAP=stack.kafka_bootstrap,
        HORAE_DATABASE_URL=stack.database_url,
        HORAE_TOPIC_PREFIX=prefix,
        HORAE_TOPIC_PARTITIONS="3",
        HORAE_PROJECTION_SCHEMA=schema,
        HORAE_TENANT_KEYS=json.dumps({TENANT: {KEY_ID: SECRET}}),
        HORAE_PLATFORM_KEY=platform_key,
        HORAE_DISPATCHER_ALLOW=json.dumps(["127.0.0.1/32"]),
        HORAE_DISPATCHER_WEBHOOK_SECRETS=json.dumps(WEBHOOK_SECRETS),
        HORAE_PLANNER_SLOT=f"fe-{unique}",
        HORAE_LOG_LEVEL="WARNING",
    )
    logs = tmp_path_factory.mktemp("fuzz-e2e-logs")

    def horae(*args: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "horae.cli.main", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, f"horae {' '.join(args)}: {done.stdout}{done.stderr}"

    processes: list[subprocess.Popen[bytes]] = []
    history: PostgresHistory | None = None
    sink: KafkaSink | None = None
    try:
        horae("topics", "apply")
        horae("migrate")
        for name in ("planner", "dispatcher", "projector"):
            with (logs / f"{name}.log").open("wb") as log:
                processes.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "horae.cli.main", name],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
        settings_ = Settings.model_validate(
            {
                **shared,
                "topic_prefix": prefix,
                "api": {
                    "token_keys": {"k1": token_key},
                    "token_kid": "k1",
                    "burst": 100_000,
                    "require_verified_targets": False,
                },
            }
        )
        sink = KafkaSink(stack.kafka_bootstrap, prefix)
        history = PostgresHistory(stack.database_url, schema, max_size=2)
        app = create_app(settings_, sink, history)
        token = issue(
            {"k1": token_key}, "k1", tenant=TENANT, roles=[ev.Role.AUTHOR, ev.Role.READ],
            subject="fuzz", ttl_s=24 * 3600, now=datetime.now(UTC),
        )  # fmt: skip
        with psycopg.connect(stack.database_url, autocommit=True) as db:
            yield System(
                stack.kafka_bootstrap, prefix, schema, db,
                TestClient(app, raise_server_exceptions=False), history, token,
                f"http://127.0.0.1:{receiver.server_address[1]}", hits, logs, processes,
            )  # fmt: skip
    finally:
        kill_all(processes)
        receiver.shutdown()
        receiver.server_close()
        if history is not None:
            history.close()
        if sink is not None:
            sink.close()
        delete_under(stack.kafka_bootstrap, prefix)
        with psycopg.connect(stack.database_url, autocommit=True) as conn:
            for name in (schema, f"{schema}_api"):
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


# --- the stall detector --------------------------------------------------------------------


@dataclass
class Lag:
    """A consumer's backlog (records between its committed position and the end) and how long
    it has stood still (a backlog whose committed position does not move)."""

    backlog: int = 0
    position: int = -1
    still_since: float = field(default_factory=time.monotonic)
    worst_s: float = 0.0
    worst_backlog: int = 0


class StallWatch:
    """Samples every consumer's lag twice a second in a thread (:meth:`consumers`). A backlog is
    the committed records after a consumer's position, read back: the difference between the end
    offset and the position is not one, since a transaction's commit marker takes an offset after
    its last record that no consumer ever commits past."""

    def __init__(self, system: System) -> None:
        self.system = system
        self.reader = KafkaPartitionReader(system.bootstrap)
        self._members: dict[str, Consumer] = {}
        self._lock = threading.Lock()  # the watch thread and caught_up() share the clients
        self.lags: dict[str, Lag] = {"planner": Lag(), "dispatcher": Lag(), "projector": Lag()}
        self.samples = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stall-watch", daemon=True)
        s = system
        planner = [s.topic(Topic.DEFINITIONS), s.topic(Topic.COMMANDS), s.topic(Topic.OUTCOMES)]
        self.inputs = {
            "planner": planner,
            "dispatcher": [s.topic(lane_topic(lane)) for lane in ev.Lane],
        }
        self.groups = {"planner": f"{s.prefix}planner", "dispatcher": f"{s.prefix}dispatcher"}

    def __enter__(self) -> StallWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        for consumer in self._members.values():
            consumer.close()

    def _committed(
        self, group: str, ends: dict[tuple[str, int], int]
    ) -> dict[tuple[str, int], int]:
        if group not in self._members:  # one per group, asked again each sample (never joins)
            config = {"group.id": group, "log_level": 3, "enable.auto.commit": False}
            self._members[group] = Consumer(client_config(self.system.bootstrap, config))
        parts = self._members[group].committed([TopicPartition(t, p) for t, p in ends], timeout=10)
        return {(tp.topic, tp.partition): max(tp.offset, 0) for tp in parts}

    def _behind(self, ends: dict[tuple[str, int], int], done: dict[tuple[str, int], int]) -> int:
        """The committed records after each position ``done`` up to ``ends``, counted."""
        behind = 0
        for (topic, partition), end in ends.items():
            start = done.get((topic, partition), 0)
            if end > start:
                behind += sum(1 for _ in self.reader.read(topic, partition, start, end))
        return behind

    def consumers(self) -> dict[str, tuple[int, int]]:
        """(backlog, committed position summed) of each consumer now."""
        with self._lock:
            return self._consumers()

    def _consumers(self) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for name, topics in self.inputs.items():
            ends = end_offsets(self.system.bootstrap, topics)
            done = self._committed(self.groups[name], ends)
            out[name] = (self._behind(ends, done), sum(done.values()))
        rows = self.system.db.execute(
            f'SELECT topic, partition, next_offset FROM "{self.system.schema}".projection_offsets'
        ).fetchall()
        stored = {(str(t), int(p)): int(o) for t, p, o in rows}
        ends = end_offsets(
            self.system.bootstrap, sorted({t for t, _ in stored} | self._projected())
        )
        out["projector"] = (self._behind(ends, stored), sum(stored.values()))
        return out

    def _projected(self) -> set[str]:
        s = self.system
        return {
            s.topic(Topic.ACCEPTED), s.topic(Topic.FIRES), s.topic(Topic.ATTEMPTS),
            s.topic(Topic.OUTCOMES), s.topic(Topic.AUDIT), events_topic(TENANT, s.prefix),
        }  # fmt: skip

    def _run(self) -> None:
        try:
            while not self._stop.wait(0.5):
                now = time.monotonic()
                for name, (backlog, position) in self.consumers().items():
                    lag = self.lags[name]
                    if backlog == 0 or position != lag.position:
                        lag.still_since = now
                    lag.backlog, lag.position = backlog, position
                    if now - lag.still_since > lag.worst_s:
                        lag.worst_s, lag.worst_backlog = now - lag.still_since, backlog
                self.samples += 1
        except BaseException as exc:  # reported by check()
            self.error = exc

    def check(self) -> None:
        assert self.error is None, f"the stall watch failed: {self.error!r}"
        stalled = {n: (lag.worst_s, lag.worst_backlog) for n, lag in self.lags.items()}
        assert all(s <= STALL_S for s, _ in stalled.values()), (stalled, self.system.tail())

    def caught_up(self) -> bool:
        self.system.alive()
        return all(backlog == 0 for backlog, _ in self.consumers().values())


@pytest.fixture(scope="module")
def watch(system: System) -> Iterator[StallWatch]:
    with StallWatch(system) as w:
        yield w
    w.check()


# --- the inputs ------------------------------------------------------------------------------


@st.composite
def e2e_body(draw: st.DrawFn, receiver: str) -> dict[str, Any]:
    """A TriggerIn body with nasty values; its webhook targets are the local receiver (with a
    nasty path) or addresses the policies refuse — none a dispatcher would retry for ever."""
    kind = draw(st.sampled_from(["webhook", "webhook", "event"]))
    path = draw(st.sampled_from(["/hook", "/a%20b", "/\x00", "/ü", "/" + "p" * 3000, "/x?y=1"]))
    url = draw(st.sampled_from([receiver + path, "http://10.0.0.1/x", "ftp://x/", ""]))
    target: dict[str, Any] = {
        "kind": kind,
        "url": url,
        "method": draw(METHODS),
        "headers": draw(st.dictionaries(HEADER_NAMES, NASTY_TEXT, max_size=2)),
        "secret_refs": draw(st.sampled_from([["acme-hook"], [], ["acme-hook\x00"]])),
    }
    if kind == "event":
        target = {"kind": "event", "topic": draw(st.sampled_from(["events.acme", "x\x00"]))}
    return {
        "recurrence": {"kind": "cron", "expr": draw(CRONS), "zone": draw(ZONES)},
        "target": target,
        "description": draw(st.one_of(st.none(), NASTY_TEXT)),
        "labels": draw(LABELS),
        "content_type": draw(st.sampled_from(["application/json", "text/plain\r\nX: y", "é"])),
        "payload": draw(st.sampled_from(["", "{}", "\x00", "x" * 2000])),
    }


@st.composite
def clean_body(draw: st.DrawFn, receiver: str) -> dict[str, Any]:
    """A body that is valid but for, maybe, its description (so both outcomes are seen)."""
    target: dict[str, Any] = {
        "kind": "webhook",
        "url": receiver + "/hook",
        "secret_refs": ["acme-hook"],
    }
    if draw(st.booleans()):
        target = {"kind": "event", "topic": "events.acme"}
    return {
        "recurrence": {"kind": "cron", "expr": "* * * * *", "zone": "UTC"},
        "target": target,
        "description": draw(st.one_of(st.none(), NASTY_TEXT)),
        "labels": {},
    }


ROUND = [0]


def run_round(system: System, watch: StallWatch, bodies: list[dict[str, Any]]) -> None:
    """One round: each body through the API (and a manual run of each it accepts) and straight
    into Kafka; then every input is refused with a cause or reaches the ledger and the read
    model, and every consumer caught up."""
    ROUND[0] += 1
    n = ROUND[0]
    accepted: dict[str, tuple[int, str]] = {}  # trigger id -> (version, target kind)
    runs: dict[str, str] = {}  # fire key -> target kind
    direct: list[str] = []
    for i, body in enumerate(bodies):
        trigger_id = f"a{n}-{i}"
        r = system.api.post(
            "/v1/schedules",
            content=json_text({"trigger_id": trigger_id, **body}),
            headers=system.headers(),
        )
        COUNTS[f"api {r.status_code}"] += 1
        assert r.status_code == 201 or r.status_code in REFUSALS, (r.status_code, r.text)
        if r.status_code != 201:
            assert r.headers["content-type"] == "application/problem+json" and r.json()["detail"]
            continue
        accepted[trigger_id] = (r.json()["version"], body["target"]["kind"])
        ran = system.api.post(f"/v1/schedules/{trigger_id}/run", headers=system.headers())
        assert ran.status_code == 202, ran.text
        runs[ran.json()["fire_key"]] = body["target"]["kind"]
        COUNTS["manual runs"] += 1
        # the same body straight into Kafka, signed with the tenant key, as JSON text
        kafka_id = f"k{n}-{i}"
        obj = {
            "tenant": TENANT, "trigger_id": kafka_id, "version": 1, "state": "live",
            "authored_at": "2026-01-01T00:00:00Z", "author": "fuzz", **body,
        }  # fmt: skip
        produce(system, Topic.DEFINITIONS, f"{TENANT}/{kafka_id}", json_text(obj).encode())
        direct.append(kafka_id)
    for i, body in enumerate(bodies):  # and each body signed, as Avro where it can be
        kafka_id = f"s{n}-{i}"
        d = signed(kafka_id, body)
        if d is not None:
            produce(system, Topic.DEFINITIONS, f"{TENANT}/{kafka_id}", encode(d))
            direct.append(kafka_id)

    why = [""]  # what the last look found not settled

    def settled() -> dict[str, Any] | None:
        if not watch.caught_up():
            why[0] = f"backlogs {watch.consumers()}"
            return None
        records = read_all(system.bootstrap, system.topic(Topic.QUARANTINE))
        quarantined = {
            q.trigger_id: q for q in (decode(v, ev.Quarantined) for _, v in records if v)
        }
        listed = {}
        for trigger_id in [*accepted, *direct]:
            stored = system.history.trigger(TENANT, trigger_id)
            if stored is not None:
                listed[trigger_id] = stored.definition.version
        for trigger_id, (version, _) in accepted.items():
            if listed.get(trigger_id) != version:
                why[0] = f"{trigger_id} listed at {listed.get(trigger_id)}, not {version}"
                return None
        for trigger_id in direct:
            if trigger_id not in listed and trigger_id not in quarantined:
                why[0] = f"{trigger_id} neither listed nor quarantined"
                return None
        stories = {key: system.history.fire(TENANT, key) for key in runs}
        for key, kind in runs.items():
            story = stories[key]
            if story is None:
                q = [
                    (x.cause, x.detail) for x in quarantined.values() if (x.trigger_id or "") in key
                ]
                why[0] = f"manual run {key} not projected (quarantined: {q})"
                return None
            if kind == "webhook" and story.fire.get("state") == "fired" and not story.attempts:
                why[0] = f"manual run {key} fired with no attempt projected"
                return None
        return {"quarantined": quarantined, "listed": listed, "stories": stories}

    found = wait_until(
        settled, 120, 0.5, lambda: f"round {n} did not settle: {why[0]}{system.tail()}"
    )
    assert found is not None
    for trigger_id in direct:
        if trigger_id in found["listed"]:
            COUNTS["kafka accepted"] += 1
        else:
            q = found["quarantined"][trigger_id]
            assert q.cause and q.detail, q
            COUNTS[f"kafka quarantined {q.cause}"] += 1
    for story in found["stories"].values():
        COUNTS[f"fire {story.fire.get('status') or story.fire.get('state')}"] += 1
        if story.attempts:
            last = story.attempts[-1]
            COUNTS[f"attempt {last.get('transport_result') or last.get('not_sent')}"] += 1
    COUNTS["rounds"] += 1


def produce(system: System, topic: Topic, key: str, value: bytes) -> None:
    from confluent_kafka import Producer

    producer = Producer(client_config(system.bootstrap, {"log_level": 3}))
    producer.produce(system.topic(topic), value, key.encode())
    assert producer.flush(30) == 0


def signed(trigger_id: str, body: dict[str, Any]) -> ev.TriggerDefinition | None:
    from tests.integration.security.test_ingress_fuzz import as_definition

    target = {"url": None, "method": "POST", "headers": {}, "secret_refs": [], **body["target"]}
    full = {"description": None, "labels": {}, "content_type": "", **body, "target": target}
    d = as_definition(trigger_id, full)
    if d is None:
        return None
    try:
        mine = signing.sign(replace(d, tenant=TENANT, signature=None), KEY_ID, SECRET.encode())
        encode(mine)
    except (UnicodeEncodeError, ValueError):
        return None
    return mine


@FUZZ
@given(data=st.data())
def test_every_input_is_refused_with_a_cause_or_reaches_the_ledger_and_read_model(
    system: System, watch: StallWatch, data: st.DataObject
) -> None:
    bodies = data.draw(st.lists(e2e_body(system.receiver), min_size=2, max_size=2))
    bodies.append(data.draw(clean_body(system.receiver)))
    run_round(system, watch, bodies)


def test_the_counts(system: System, watch: StallWatch) -> None:
    """Both outcomes were seen, the watch sampled, no consumer stood still; the counts are
    printed (and written to ``HORAE_FUZZ_REPORT``)."""
    watch.check()
    report = {
        "rounds": COUNTS["rounds"],
        "counts": dict(sorted(COUNTS.items())),
        "receiver_hits": len(system.hits),
        "stall_samples": watch.samples,
        "worst_still_s": {n: round(lag.worst_s, 1) for n, lag in watch.lags.items()},
    }
    print(json.dumps(report, indent=2))
    if os.environ.get("HORAE_FUZZ_REPORT"):
        Path(os.environ["HORAE_FUZZ_REPORT"]).write_text(json.dumps(report, indent=2))
    assert COUNTS["rounds"] >= 1 and watch.samples > 0, report
    assert any(k.startswith("api 4") for k in COUNTS) and COUNTS["api 201"] > 0, report
