"""Clock gate: the planner decides only while its clock agrees with the broker's.

The broker stamps records of a ``LogAppendTime`` topic with its own clock. Every probe produces one
tiny record there and reads the broker's stamp from the delivery report; with the local clock read
just before sending (t0) and at the report (t1), the offset is ``broker − (t0 + t1) / 2`` give or
take ``(t1 − t0) / 2``. The gate is closed when even the most favourable reading of the last probe
exceeds the bound, or when no probe has answered for a while (a planner that cannot reach the broker
must not fire on its own clock either).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import KafkaError, Message, Producer

log = logging.getLogger(__name__)


def clock_topic(prefix: str) -> str:
    """The probe topic (one partition, ``LogAppendTime``, short retention)."""
    return f"{prefix}planner-clock"


CLOCK_TOPIC_CONFIG = {
    "message.timestamp.type": "LogAppendTime",
    "retention.ms": "3600000",
    "cleanup.policy": "delete",
}


def ensure_clock_topic(bootstrap: str, prefix: str) -> None:
    """Create the probe topic when missing (idempotent)."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = clock_topic(prefix)
    if name in admin.list_topics(timeout=30).topics:
        return
    futures = admin.create_topics([NewTopic(name, 1, -1, config=CLOCK_TOPIC_CONFIG)])
    try:
        futures[name].result(timeout=30)
    except Exception as exc:
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise


@dataclass(frozen=True)
class ClockReading:
    offset_s: float  # broker clock minus local clock
    uncertainty_s: float
    read_at: float  # time.monotonic() at the report: a reading ages in real time

    def exceeds(self, bound_s: float) -> bool:
        return abs(self.offset_s) - self.uncertainty_s > bound_s


class ClockGate:
    """Probes the broker's clock; :attr:`open` says whether deciding is allowed."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        clock: Callable[[], float],
        max_skew_s: float,
        probe_every_s: float = 5.0,
        stale_after_s: float = 30.0,
    ) -> None:
        self._topic = topic
        self._clock = clock
        self.max_skew_s = max_skew_s
        self._probe_every_s = probe_every_s
        self._stale_after_s = stale_after_s
        self._producer = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "1", "log_level": 3}
        )
        self._last_probe = float("-inf")
        self.reading: ClockReading | None = None

    def poll(self) -> None:
        """Serve delivery reports, and send a probe when one is due. A reading gone stale while
        this process was busy elsewhere (a long rebuild on assignment) is refreshed before the gate
        is judged: only a broker that does not answer closes it for staleness."""
        reading = self.reading
        if reading is not None and time.monotonic() - reading.read_at > self._stale_after_s:
            self.wait_fresh_reading(after=reading.read_at, timeout_s=min(5.0, self._stale_after_s))
            return
        self._probe()

    def _probe(self) -> None:
        now = self._clock()
        if now - self._last_probe >= self._probe_every_s:
            self._last_probe = now
            sent_at = now
            self._producer.produce(
                self._topic,
                value=b"",
                on_delivery=lambda err, msg: self._on_report(err, msg, sent_at),
            )
        self._producer.poll(0)

    def _on_report(self, err: KafkaError | None, msg: Message, sent_at: float) -> None:
        if err is not None:
            log.warning("clock probe failed: %s", err)
            return
        received = self._clock()
        _, broker_ms = msg.timestamp()
        if broker_ms <= 0:
            return
        self.reading = ClockReading(
            offset_s=broker_ms / 1000.0 - (sent_at + received) / 2.0,
            uncertainty_s=(received - sent_at) / 2.0,
            read_at=time.monotonic(),
        )

    @property
    def open(self) -> bool:
        reading = self.reading
        if reading is None:
            return False
        if time.monotonic() - reading.read_at > self._stale_after_s:
            return False
        return not reading.exceeds(self.max_skew_s)

    def wait_first_reading(self, timeout_s: float = 30.0) -> bool:
        return self.wait_fresh_reading(after=None, timeout_s=timeout_s)

    def wait_fresh_reading(self, after: float | None, timeout_s: float) -> bool:
        """Probe and wait (at most ``timeout_s``) for a reading newer than ``after``."""
        deadline = time.monotonic() + timeout_s
        self._last_probe = float("-inf")
        self._probe()
        while not self._newer(after) and time.monotonic() < deadline:
            self._producer.poll(0.1)
        return self._newer(after)

    def _newer(self, after: float | None) -> bool:
        reading = self.reading
        return reading is not None and (after is None or reading.read_at > after)

    def close(self) -> None:
        self._producer.flush(5)
