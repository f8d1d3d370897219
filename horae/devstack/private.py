"""A throwaway local Kafka: free loopback ports, a temporary state directory, started, used and
then stopped and removed. For what needs a cluster of its own beside the local stack: the
broker-kill chaos tests and the comparison bench's ``replicated`` row (three nodes)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

from horae.devstack.kafka import KafkaCluster
from horae.devstack.stack import LocalStack
from horae.settings import DevSettings, Settings


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports on 127.0.0.1 that nothing listens on right now."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(n)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


@contextlib.contextmanager
def private_cluster(prefix: str = "horae-3b-") -> Iterator[KafkaCluster]:
    """A 3-node KRaft cluster (each node also a controller; replication factor 3 and
    ``min.insync.replicas`` 2 by default, SCRAM users as ``horae dev`` makes them) in a new
    temporary directory named from ``prefix``; its admin is ``cluster.admin``."""
    kport, cport, pport, *extra = free_ports(7)
    dev = DevSettings(
        kafka_port=kport,
        kafka_controller_port=cport,
        postgres_port=pport,
        brokers=3,
        kafka_node_ports=extra,
    )
    home = Path(tempfile.mkdtemp(prefix=prefix))
    settings = Settings(kafka_bootstrap=None, database_url=None, dev=dev)
    kafka = LocalStack.from_settings(settings, state_dir=home).kafka
    assert isinstance(kafka, KafkaCluster)
    try:
        kafka.start()
        yield kafka
    finally:
        try:
            kafka.stop()
        finally:
            shutil.rmtree(home, ignore_errors=True)
