"""Two local regions, ``a`` and ``b``: each a Kafka node and a PostgreSQL cluster of its own (the
devstack's, :class:`~horae.devstack.stack.LocalStack`) on free loopback ports, under
``<state>/dr/<region>`` (its ports chosen once and kept in ``ports.json``, so a region comes back
where it was). The DR state (``<state>/dr/state.json``: which region writes, and every promotion)
lives beside them.

A region's Kafka gets the same topics, users and ACLs as the local stack's (the same code:
the catalogue's plan, :func:`~horae.kafka.acls.provision_roles`); its users'
passwords derive from its own admin's, so each region's processes log in with that region's.

Clients of a region log in as its admin: every Horae helper builds its clients from the process's
connection (:mod:`horae.kafka.connection`), so :func:`on` installs the region's for a block.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from horae.devstack.kafka import KafkaNode
from horae.devstack.private import free_ports
from horae.devstack.stack import LocalStack
from horae.dr import DrError
from horae.kafka import connection as _connection
from horae.kafka.config import KafkaCredentials
from horae.kafka.connection import KafkaConnection, use_connection
from horae.settings import DevSettings, Settings

REGIONS: tuple[str, ...] = ("a", "b")
#: each region's broker heap: two brokers and MirrorMaker share a small machine
REGION_HEAP = "384m"


def other(name: str) -> str:
    """The region that is not ``name``."""
    check_name(name)
    return REGIONS[1 - REGIONS.index(name)]


def check_name(name: str) -> None:
    if name not in REGIONS:
        raise DrError(f"unknown region {name!r}: the local regions are {', '.join(REGIONS)}")


def dr_home(settings: Settings) -> Path:
    return settings.state_dir / "dr"


@dataclass(frozen=True)
class Region:
    """One region: its stack (Kafka + PostgreSQL) and the settings its processes run with."""

    name: str
    home: Path
    stack: LocalStack
    settings: Settings = field(repr=False)

    @property
    def kafka(self) -> KafkaNode:
        assert isinstance(self.stack.kafka, KafkaNode)
        return self.stack.kafka

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap

    @property
    def admin(self) -> KafkaCredentials:
        admin = self.kafka.admin
        if admin is None:
            raise DrError(f"region {self.name} was never started (`horae dr up`)")
        return admin

    def connection(self) -> KafkaConnection:
        """The region's admin over SCRAM-SHA-512."""
        return self.kafka.connection().as_user(self.admin)

    def client(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """A librdkafka config of a client of this region, logged in as its admin."""
        return self.connection().config(extra)

    def reachable(self) -> bool:
        """Its broker answers a metadata request (as its admin)."""
        try:
            return self.kafka.admin is not None and self.kafka.healthy()
        except Exception:  # a broker that is gone answers nothing, whatever the error
            return False

    def env(self) -> dict[str, str]:
        """What a Horae process of this region needs to reach its Kafka and PostgreSQL."""
        return {
            **self.stack.client_env(),
            "HORAE_TOPIC_PREFIX": self.settings.topic_prefix,
            "HORAE_TOPIC_PARTITIONS": str(self.settings.topic_partitions),
        }


def _ports(home: Path) -> dict[str, int]:
    path = home / "ports.json"
    if path.exists():
        data: dict[str, int] = json.loads(path.read_text())
        return data
    kport, cport, pport = free_ports(3)
    ports = {"kafka": kport, "controller": cport, "postgres": pport}
    home.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ports) + "\n")
    return ports


def region(settings: Settings, name: str, home: Path | None = None) -> Region:
    """Region ``name`` under ``home`` (default ``<state>/dr/<name>``), with the prefix, partition
    count and tenants of ``settings``."""
    check_name(name)
    where = home or dr_home(settings) / name
    ports = _ports(where)
    dev = DevSettings(
        kafka_port=ports["kafka"],
        kafka_controller_port=ports["controller"],
        postgres_port=ports["postgres"],
        kafka_version=settings.dev.kafka_version,
        kafka_heap=REGION_HEAP,
    )
    local = settings.model_copy(update={"kafka_bootstrap": None, "database_url": None, "dev": dev})
    stack = LocalStack.from_settings(local, state_dir=where / "stack", cache_dir=settings.cache_dir)
    endpoints = stack.endpoints
    mine = settings.model_copy(
        update={
            "kafka_bootstrap": endpoints.kafka_bootstrap,
            "database_url": endpoints.database_url,
            "dev": dev,
        }
    )
    return Region(name, where, stack, mine)


@contextlib.contextmanager
def on(r: Region) -> Iterator[KafkaConnection]:
    """Every client built in this block logs in to region ``r`` as its admin."""
    saved = _connection._PROCESS
    conn = r.connection()
    use_connection(conn)
    try:
        yield conn
    finally:
        use_connection(saved)


def provision(r: Region, tenants: tuple[str, ...] = ()) -> dict[str, KafkaCredentials]:
    """The topic catalogue, the process roles' users and the ACLs of the roles and of
    ``tenants`` (and the settings' tenants) in region ``r``, as ``horae dev up`` and
    ``horae topics apply`` make them; each role's credentials in ``r``."""
    from horae.kafka.acls import provision_roles
    from horae.kafka.admin import Plan, admin_client, apply, auto_replication_factor

    s = r.settings
    every = tuple(dict.fromkeys((*s.tenant_keys, *tenants)))
    with on(r):
        admin = admin_client(r.bootstrap)
        rf = s.topic_replication_factor or auto_replication_factor(admin)
        apply(admin, Plan(s.topic_prefix, s.topic_partitions, rf, every))
        return provision_roles(r.bootstrap, r.admin, s.topic_prefix, every)


# --- which region writes ---------------------------------------------------------------------


@dataclass(frozen=True)
class DrState:
    """Which region writes, and the promotions so far (oldest first)."""

    active: str = REGIONS[0]
    promotions: tuple[dict[str, Any], ...] = ()
    #: the standby wiped since the last promotion (``reset_standby``): MM2 may mirror into it
    fresh: str | None = None


def read_state(home: Path) -> DrState:
    path = home / "state.json"
    if not path.exists():
        return DrState()
    data = json.loads(path.read_text())
    fresh = data.get("fresh")
    return DrState(
        str(data["active"]),
        tuple(data.get("promotions", ())),
        None if fresh is None else str(fresh),
    )


def write_state(home: Path, state: DrState) -> None:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "state.json"
    tmp = path.with_suffix(".tmp")
    body = {"active": state.active, "promotions": list(state.promotions), "fresh": state.fresh}
    tmp.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
