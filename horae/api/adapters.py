"""The real adapters of the API's ports: :class:`KafkaSink` produces to the definitions and
commands topics (the client's producer settings: murmur2 partitioning, idempotence; the API's
own Kafka user), :class:`PostgresHistory` reads the read models through
:class:`~horae.projections.queries.HistoryQueries` as the reader role."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import psycopg
from confluent_kafka import KafkaError, Message, Producer
from psycopg_pool import ConnectionPool

from horae.api.ports import BadCursor, BadValue, FireStory, LatenessRow, Page, StoredTrigger
from horae.api.render import DEFAULTS, row_listed
from horae.contracts import events as ev
from horae.contracts.codec import Codec, default_codec
from horae.contracts.ingress import decode_definition
from horae.contracts.topics import PRODUCER_DEFAULTS, Topic, topic_name
from horae.devstack.probe import database_healthy, kafka_healthy
from horae.kafka.config import client_config
from horae.projections import queries as q

ACK_TIMEOUT_S = 30.0
T = TypeVar("T")


def _settle(acked: asyncio.Future[None], err: KafkaError | None) -> None:
    if acked.done():  # timed out and cancelled
        return
    if err is None:
        acked.set_result(None)
    else:
        acked.set_exception(ConnectionError(str(err)))


#: the window of a trigger's events page, which the API does not bound by time
EPOCH, FOREVER = datetime(1970, 1, 1, tzinfo=UTC), datetime(9999, 1, 1, tzinfo=UTC)


class KafkaSink:
    """Produces signed definitions and commands. Each call is a coroutine that returns once the
    broker acknowledged its records: the delivery callback (served by one poller thread) resolves
    an asyncio future in the caller's event loop, so concurrent requests share the producer's
    batches and broker round trips instead of each holding a thread."""

    def __init__(self, bootstrap: str, prefix: str, codec: Codec | None = None) -> None:
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.codec = codec or default_codec()
        self.producer = Producer(client_config(bootstrap, PRODUCER_DEFAULTS))
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="api-producer", daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.producer.poll(0.05)

    async def _send(
        self,
        topic: Topic,
        key: str,
        value: bytes,
        partitions: list[int | None],
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        sent: list[tuple[str, str | bytes | None]] = list(headers or [])
        loop = asyncio.get_running_loop()
        name = topic_name(topic, self.prefix)
        waits: list[asyncio.Future[None]] = []
        for partition in partitions:
            acked: asyncio.Future[None] = loop.create_future()

            def delivered(
                err: KafkaError | None, _msg: Message[Any, Any], acked: asyncio.Future[None] = acked
            ) -> None:
                loop.call_soon_threadsafe(_settle, acked, err)

            if partition is None:
                self.producer.produce(
                    name, value, key.encode(), on_delivery=delivered, headers=sent
                )
            else:
                self.producer.produce(
                    name, value, key.encode(), partition=partition, on_delivery=delivered,
                    headers=sent,
                )  # fmt: skip
            waits.append(acked)
        try:
            async with asyncio.timeout(ACK_TIMEOUT_S):
                await asyncio.gather(*waits)
        except TimeoutError:
            raise TimeoutError(
                f"not acknowledged by {self.bootstrap} within {ACK_TIMEOUT_S} s"
            ) from None

    async def put_definition(self, d: ev.TriggerDefinition) -> None:
        key = ev.trigger_key(d.tenant, d.trigger_id)
        await self._send(Topic.DEFINITIONS, key, self.codec.encode(d), [None])

    async def put_command(self, command: ev.Command, *, every_partition: bool = False) -> None:
        key = ev.trigger_key(command.tenant, command.trigger_id)
        partitions: list[int | None] = [None]
        if every_partition:
            name = topic_name(Topic.COMMANDS, self.prefix)
            meta = await asyncio.to_thread(self.producer.list_topics, name, timeout=10)
            found = meta.topics.get(name)
            if found is None or found.error is not None or not found.partitions:
                raise ConnectionError(f"topic {name!r} not found")
            partitions = list(sorted(found.partitions))
        await self._send(Topic.COMMANDS, key, self.codec.encode(command), partitions)

    async def put_audit(self, entry: ev.AuditEntry) -> None:
        await self._send(Topic.AUDIT, entry.tenant, self.codec.encode(entry), [None])

    async def put_order(
        self, order: ev.DispatchOrder, partition: int, headers: list[tuple[str, bytes]]
    ) -> None:
        value = self.codec.encode(order)
        await self._send(Topic.LANE_RETRY, order.fire.fire_key, value, [partition], headers)

    def problem(self) -> str | None:
        if kafka_healthy(self.bootstrap, timeout_s=3.0):
            return None
        return f"Kafka at {self.bootstrap} does not answer"

    def close(self) -> None:
        self._stop.set()
        self._poller.join(5)
        self.producer.flush(10)


def _definition(row: dict[str, Any]) -> ev.TriggerDefinition:
    """A definition from its read-model row (the same JSON path as ingress)."""
    obj = {
        "tenant": row["tenant"],
        "trigger_id": row["trigger_id"],
        "version": row["version"],
        "state": row["state"],
        "recurrence": row["recurrence"],
        "target": row["target"],
        "policies": row["policies"],
        "quotas": row["quotas"],
        "authored_at": row["authored_at"].isoformat(),
        "author": row["author"],
        "role": row["role"],
        "description": row["description"],
        "labels": row["labels"],
        "content_type": row["content_type"],
        "payload": {"base64": base64.b64encode(bytes(row["payload"])).decode()},
    }
    return decode_definition(json.dumps(obj).encode())


def _stored(row: dict[str, Any]) -> StoredTrigger:
    return StoredTrigger(
        _definition(row), row["first_authored_at"], row["authored_at"], row["shown_state"]
    )


def _page(page: q.RowPage, items: list[Any] | None = None) -> Page:
    return Page(page.items if items is None else items, page.next_cursor)


class PostgresHistory:
    """The read models, read-only, through :class:`HistoryQueries`."""

    def __init__(self, url: str, schema: str = "horae", max_size: int = 8) -> None:
        self.url = url
        self.pool: ConnectionPool[Any] = ConnectionPool(
            url, min_size=1, max_size=max_size, open=True, kwargs={"autocommit": True}
        )
        self.queries = q.HistoryQueries(self.pool, schema)

    def _q(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``func``'s answer; a cursor it refuses is :class:`BadCursor`, a value PostgreSQL
        cannot hold or compare (a data error) :class:`BadValue`."""
        try:
            return func(*args, **kwargs)
        except q.BadCursor as exc:
            raise BadCursor(str(exc)) from None
        except psycopg.DataError as exc:
            raise BadValue(f"{type(exc).__name__}: {exc}") from None

    def trigger(self, tenant: str, trigger_id: str) -> StoredTrigger | None:
        row = self._q(self.queries.trigger_row, tenant, trigger_id)
        return None if row is None else _stored(row)

    def triggers(
        self,
        tenant: str,
        *,
        limit: int,
        cursor: str | None,
        label: tuple[str, str] | None,
        state: str | None,
    ) -> Page:
        labels = None if label is None else {label[0]: label[1]}
        page = self._q(self.queries.trigger_rows, tenant, limit, cursor, state, labels, DEFAULTS)
        return _page(page, [row_listed(r) for r in page.items])

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
        page = self._q(self.queries.fires, tenant, trigger_id, since, until, states, limit, cursor)
        return _page(page)

    def last_fires(
        self, tenant: str, trigger_ids: Sequence[str], before: datetime
    ) -> dict[str, Mapping[str, Any]]:
        return dict(self._q(self.queries.last_fires, tenant, trigger_ids, before))

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
        labels = None if label is None else {label[0]: label[1]}
        search = self.queries.search_fires
        return _page(self._q(search, tenant, since, until, states, labels, limit, cursor))

    def fire(self, tenant: str, fire_key: str) -> FireStory | None:
        found = self._q(self.queries.fire, tenant, fire_key)
        if found is None:
            return None
        return FireStory(found.fire, found.attempts, found.outcome, found.outcomes)

    def lateness(
        self, tenant: str, since: datetime, until: datetime, trigger_id: str | None
    ) -> tuple[LatenessRow, list[LatenessRow]]:
        rows = [
            LatenessRow(r["fires"], r["p50"], r["p99"], r["max"], r["missed"], r["trigger_id"])
            for r in self._q(self.queries.lateness_summary, tenant, since, until, trigger_id)
        ]
        total = next((r for r in rows if r.trigger_id is None), None)
        per = [r for r in rows if r.trigger_id is not None]
        return total or LatenessRow(0, None, None, None, 0), per

    def events(self, tenant: str, trigger_id: str, limit: int, cursor: str | None) -> Page:
        page = self._q(self.queries.events, tenant, trigger_id, EPOCH, FOREVER, limit, cursor)
        return _page(page)

    def audit(
        self, tenant: str, since: datetime, until: datetime, limit: int, cursor: str | None
    ) -> Page:
        return _page(self._q(self.queries.audit_entries, tenant, since, until, limit, cursor))

    def audit_entry(self, tenant: str, audit_id: str) -> Mapping[str, Any] | None:
        return self._q(self.queries.audit_entry, tenant, audit_id)

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
        page = self._q(
            self.queries.dead_letters, tenant, ids=ids, trigger_id=trigger_id,
            labels=dict(labels) if labels else None, since=since, until=until, cause=cause,
            state=state, limit=limit, cursor=cursor,
        )  # fmt: skip
        return _page(page)

    def problem(self) -> str | None:
        if database_healthy(self.url, timeout_s=3):
            return None
        return "PostgreSQL does not answer"

    def close(self) -> None:
        self.pool.close()
