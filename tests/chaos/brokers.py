"""Finding and breaking one broker of a 3-broker KRaft cluster by its role: the leader of a
partition, the active controller; replicas back in sync; a SIGKILL that waits for the death.
Shared by the broker-kill tests and the soak's driver on three brokers."""

from __future__ import annotations

import os
import signal

from horae.devstack.kafka import KafkaCluster, KafkaNode
from horae.devstack.procs import alive
from horae.kafka.admin import admin_client
from tests.waiting import wait_until

#: the transaction coordinators' topic (one partition on the local clusters: it coordinates all)
TXN_STATE = "__transaction_state"


def leader(bootstrap: str, topic: str, partition: int) -> int:
    """The broker id leading ``topic``/``partition``."""
    meta = admin_client(bootstrap).list_topics(topic, timeout=30)
    return int(meta.topics[topic].partitions[partition].leader)


def in_sync(bootstrap: str, topics: list[str]) -> bool:
    """Three brokers answer and every partition of ``topics`` has a leader and three in-sync
    replicas."""
    meta = admin_client(bootstrap).list_topics(timeout=30)
    if len(meta.brokers) < 3:
        return False
    return all(
        len(p.isrs) == 3 and p.leader >= 0
        for name in topics
        for p in meta.topics[name].partitions.values()
    )


def kill(node: KafkaNode) -> None:
    """SIGKILL ``node``'s process group, and wait until it is gone."""
    pid = node.running_pid()
    assert pid is not None, f"broker {node.node_id} is not running"
    os.killpg(pid, signal.SIGKILL)
    wait_until(lambda: not alive(pid), 30, 0.1, f"broker {node.node_id} outlived SIGKILL")


def active_controller(cluster: KafkaCluster) -> int:
    """The quorum's leader (the active controller): the node whose Raft manager last logged
    becoming leader (log lines start with a sortable ``[yyyy-mm-dd hh:mm:ss,mmm]``)."""
    latest: tuple[str, int] | None = None
    for node in cluster.nodes:
        text = (node.logs_dir / "server.log").read_text(errors="replace")
        for line in text.splitlines():
            became = "Completed transition to Leader(" in line and "[RaftManager id=" in line
            if became and (latest is None or line[:25] >= latest[0]):
                latest = (line[:25], node.node_id)
    assert latest is not None, "no controller logged becoming the leader"
    return latest[1]
