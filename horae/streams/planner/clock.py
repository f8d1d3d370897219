"""Clock gate: the planner decides only while its clock agrees with the broker's.

The broker stamps records of a ``LogAppendTime`` topic with its own clock. Every probe produces one
tiny record there and reads the broker's stamp from the delivery report; with the local clock read
just before sending (t0) and at the report (t1), the offset is ``broker − (t0 + t1) / 2`` give or
take ``(t1 − t0) / 2``. The gate is closed when even the most favourable reading of the last probe
exceeds the bound, or when no probe has answered for a while (a planner that cannot reach the broker
must not fire on its own clock either).

The gate reads time through a :class:`~horae.ports.Clock` (wall time for the offset, monotonic time
for the age of a reading) and the broker through a :class:`BrokerClock`
(:class:`KafkaBrokerClock`; :class:`horae.testing.VirtualBrokerClock` in unit tests).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from confluent_kafka import KafkaError, Message, Producer

from horae.kafka.config import client_config
from horae.ports import Clock

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
    from horae.kafka.admin import admin_client, ensure_topic

    ensure_topic(admin_client(bootstrap), clock_topic(prefix), 1, CLOCK_TOPIC_CONFIG)


@dataclass(frozen=True)
class ClockReading:
    offset_s: float  # broker clock minus local clock
    uncertainty_s: float
    read_at: float  # Clock.monotonic() at the report: a reading ages in real time

    def exceeds(self, bound_s: float) -> bool:
        return abs(self.offset_s) - self.uncertainty_s > bound_s


class BrokerClock(Protocol):
    """The broker's clock, read by probes."""

    def probe(self, on_stamp: Callable[[float | None], None]) -> None:
        """Send one probe; ``on_stamp`` is called later, from :meth:`poll`, with the broker's
        time (epoch seconds) for it, or None when the probe failed."""

    def poll(self, timeout_s: float) -> None:
        """Serve the answers that arrived, waiting at most ``timeout_s`` for one."""

    def close(self) -> None:
        """Wait (briefly) for the probes in flight; release the connection."""


class KafkaBrokerClock:
    """Probes are empty records on a ``LogAppendTime`` topic (:func:`clock_topic`); the stamp is
    the timestamp the broker gave the record, read from its delivery report."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._topic = topic
        self._producer = Producer(
            client_config(bootstrap, {"linger.ms": 0, "acks": "1", "log_level": 3})
        )

    def probe(self, on_stamp: Callable[[float | None], None]) -> None:
        def report(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                log.warning("clock probe failed: %s", err)
                on_stamp(None)
                return
            _, broker_ms = msg.timestamp()
            on_stamp(broker_ms / 1000.0 if broker_ms > 0 else None)

        self._producer.produce(self._topic, value=b"", on_delivery=report)

    def poll(self, timeout_s: float) -> None:
        self._producer.poll(timeout_s)

    def close(self) -> None:
        """Deliver what is pending (5 s at most), then drop what a broker never took: a queued
        probe holds its callback (and so the gate), which would keep this producer reconnecting
        for the life of the process."""
        self._producer.flush(5)
        self._producer.purge()
        self._producer.poll(0)  # serve the purged probes' reports


class ClockGate:
    """Probes the broker's clock; :attr:`open` says whether deciding is allowed."""

    def __init__(
        self,
        broker: BrokerClock,
        clock: Clock,
        max_skew_s: float,
        probe_every_s: float = 5.0,
        stale_after_s: float = 30.0,
    ) -> None:
        self._broker = broker
        self._clock = clock
        self.max_skew_s = max_skew_s
        self._probe_every_s = probe_every_s
        self._stale_after_s = stale_after_s
        self._last_probe = float("-inf")
        self.reading: ClockReading | None = None

    def poll(self) -> None:
        """Serve probe answers, and send a probe when one is due. A reading gone stale while
        this process was busy elsewhere (a long rebuild on assignment) is refreshed before the gate
        is judged: only a broker that does not answer closes it for staleness."""
        reading = self.reading
        if reading is not None and self._clock.monotonic() - reading.read_at > self._stale_after_s:
            self.wait_fresh_reading(after=reading.read_at, timeout_s=min(5.0, self._stale_after_s))
            return
        self._probe()

    def _probe(self) -> None:
        now = self._clock.now()
        if now - self._last_probe >= self._probe_every_s:
            self._last_probe = now
            self._broker.probe(lambda stamp: self._on_stamp(stamp, now))
        self._broker.poll(0)

    def _on_stamp(self, broker_s: float | None, sent_at: float) -> None:
        if broker_s is None:
            return
        received = self._clock.now()
        self.reading = ClockReading(
            offset_s=broker_s - (sent_at + received) / 2.0,
            uncertainty_s=(received - sent_at) / 2.0,
            read_at=self._clock.monotonic(),
        )

    @property
    def open(self) -> bool:
        reading = self.reading
        if reading is None:
            return False
        if self._clock.monotonic() - reading.read_at > self._stale_after_s:
            return False
        return not reading.exceeds(self.max_skew_s)

    def wait_first_reading(self, timeout_s: float = 30.0) -> bool:
        return self.wait_fresh_reading(after=None, timeout_s=timeout_s)

    def wait_fresh_reading(self, after: float | None, timeout_s: float) -> bool:
        """Probe and wait (at most ``timeout_s``) for a reading newer than ``after``."""
        deadline = self._clock.monotonic() + timeout_s
        self._last_probe = float("-inf")
        self._probe()
        while not self._newer(after) and self._clock.monotonic() < deadline:
            self._broker.poll(0.1)
        return self._newer(after)

    def _newer(self, after: float | None) -> bool:
        reading = self.reading
        return reading is not None and (after is None or reading.read_at > after)

    def close(self) -> None:
        self._broker.close()
