"""Kafka principals and their ACLs (the broker's ``StandardAuthorizer``: no ACL, no access).

One principal per process role (``planner``, ``dispatcher``, ``projector``, ``api``: SCRAM users
of those names, see :data:`ROLES`) with exactly the topics, consumer groups and transactional ids
it uses, all under the deployment's topic prefix; and one principal per tenant
(``tenant.<token>``, :func:`tenant_principal`) that may write ``definitions`` and ``commands``,
read only its own events topics (``<prefix>events.<token>`` and ``<prefix>events.<token>.*``) and
use only the consumer groups ``<prefix>tenant.<token>.*`` (:func:`tenant_group_prefix`). The admin
(the broker's only super user) needs no ACL.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from horae.contracts import events as ev
from horae.contracts.topics import Topic, events_topic, lane_topic, tenant_token, topic_name
from horae.kafka.config import KafkaCredentials, client_config
from horae.kafka.scram import upsert_scram_users

TIMEOUT_S = 30.0
LITERAL = ResourcePatternType.LITERAL
PREFIXED = ResourcePatternType.PREFIXED
READ, WRITE, DESCRIBE, CREATE = (
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.DESCRIBE,
    AclOperation.CREATE,
)
LANES = tuple(lane_topic(lane) for lane in ev.Lane)

# role -> (topics read, topics written); the events topics of every tenant are added per role
_TOPICS: dict[str, tuple[tuple[Topic, ...], tuple[Topic, ...]]] = {
    "planner": (
        (Topic.DEFINITIONS, Topic.ACCEPTED, Topic.COMMANDS, Topic.PLANNER_STATE, Topic.OUTCOMES),
        (
            Topic.ACCEPTED,
            Topic.PLANNER_STATE,
            Topic.FIRES,
            *LANES,
            Topic.QUARANTINE,
            Topic.AUDIT,
        ),
    ),
    "dispatcher": (
        (*LANES, Topic.DLQ),
        (
            Topic.ATTEMPTS,
            Topic.OUTCOMES,
            Topic.LANE_RETRY,
            Topic.DLQ,
            Topic.COMMANDS,  # the breaker's pause (horae.streams.dispatcher.breaker)
            Topic.AUDIT,
        ),
    ),
    "projector": (
        (
            Topic.ACCEPTED,
            Topic.FIRES,
            Topic.ATTEMPTS,
            Topic.OUTCOMES,
            Topic.AUDIT,
            Topic.DLQ,  # the dead letters read model
        ),
        (),
    ),
    # a group act's and a redrive's audit entry; a redrive's order (horae.api.dead_letters)
    "api": ((), (Topic.DEFINITIONS, Topic.COMMANDS, Topic.AUDIT, Topic.LANE_RETRY)),
}
#: the process roles, each a principal ``User:<role>``
ROLES: tuple[str, ...] = tuple(_TOPICS)


def _allow(
    principal: str, rtype: ResourceType, name: str, pattern: ResourcePatternType, op: AclOperation
) -> AclBinding:
    return AclBinding(rtype, name, pattern, f"User:{principal}", "*", op, AclPermissionType.ALLOW)


def _topic(
    principal: str, name: str, ops: Iterable[AclOperation], pattern: ResourcePatternType = LITERAL
) -> list[AclBinding]:
    return [_allow(principal, ResourceType.TOPIC, name, pattern, op) for op in (*ops, DESCRIBE)]


def role_bindings(role: str, prefix: str) -> list[AclBinding]:
    """The ACLs of process role ``role`` under topic prefix ``prefix``."""
    reads, writes = _TOPICS[role]
    # metadata of every topic under the prefix (no data): each process checks the catalogue
    # (horae.cli.common.ensure_topics) at start
    out = [
        _allow(role, ResourceType.TOPIC, prefix, PREFIXED, op)
        for op in (DESCRIBE, AclOperation.DESCRIBE_CONFIGS)
    ]
    for t in dict.fromkeys(reads):
        out += _topic(role, topic_name(t, prefix), [READ])
    for t in dict.fromkeys(writes):
        out += _topic(role, topic_name(t, prefix), [WRITE])
    events = f"{prefix}{Topic.SCHEDULE_EVENTS.value}."
    if role in ("planner", "dispatcher"):  # both emit schedule events; the planner creates topics
        ops = [WRITE, CREATE] if role == "planner" else [WRITE]
        out += _topic(role, events, ops, PREFIXED)
    if role == "planner":  # the clock gate's probe topic (horae.streams.planner.clock)
        out += _topic(role, f"{prefix}planner-clock", [WRITE, CREATE])
        # its due index snapshots (horae.streams.planner.snapshot)
        out += _topic(role, f"{prefix}planner-snapshots", [READ, WRITE, CREATE])
    if role == "projector":
        out += _topic(role, events, [READ], PREFIXED)
        out.append(_allow(role, ResourceType.GROUP, f"{prefix}projector.", PREFIXED, READ))
    if role in ("planner", "dispatcher"):
        out.append(_allow(role, ResourceType.GROUP, f"{prefix}{role}", LITERAL, READ))
        for op in (WRITE, DESCRIBE):
            out.append(
                _allow(role, ResourceType.TRANSACTIONAL_ID, f"{prefix}{role}-", PREFIXED, op)
            )
    if role == "dispatcher":
        out.append(_allow(role, ResourceType.GROUP, "horae-dlq", LITERAL, READ))
    return out


def tenant_principal(tenant: str) -> str:
    """The SCRAM user of ``tenant``: ``tenant.<token>`` (one-to-one, like the token)."""
    return f"tenant.{tenant_token(tenant)}"


def tenant_group_prefix(tenant: str, prefix: str) -> str:
    """The consumer groups ``tenant`` may use start with this."""
    return f"{prefix}tenant.{tenant_token(tenant)}."


def tenant_bindings(tenant: str, prefix: str) -> list[AclBinding]:
    """Write ``definitions`` and ``commands``; read its own events topics; its own groups."""
    user = tenant_principal(tenant)
    out: list[AclBinding] = []
    for t in (Topic.DEFINITIONS, Topic.COMMANDS):
        out += _topic(user, topic_name(t, prefix), [WRITE])
    own = events_topic(tenant, prefix)
    out += _topic(user, own, [READ])
    out += _topic(user, own + ".", [READ], PREFIXED)
    out.append(
        _allow(user, ResourceType.GROUP, tenant_group_prefix(tenant, prefix), PREFIXED, READ)
    )
    return out


def all_bindings(prefix: str, tenants: Iterable[str]) -> list[AclBinding]:
    out = [b for role in ROLES for b in role_bindings(role, prefix)]
    for tenant in tenants:
        out += tenant_bindings(tenant, prefix)
    return out


def apply_acls(admin: AdminClient, bindings: list[AclBinding]) -> int:
    """Create ``bindings`` (creating an existing ACL is a no-op) and return once the broker
    answers with all of them (the count created): a KRaft broker applies a created ACL to its
    authorizer a moment after the create returns, and a process started in that moment is
    refused. Raise the broker's error (``SECURITY_DISABLED`` on a broker without an
    authorizer), or :class:`TimeoutError` if they are not all visible within ``TIMEOUT_S``."""
    unique = list(dict.fromkeys(bindings))
    if not unique:
        return 0
    futures: Mapping[AclBinding, object] = admin.create_acls(unique, request_timeout=TIMEOUT_S)
    for future in futures.values():
        future.result()  # type: ignore[attr-defined]
    _await_visible(admin, unique)
    return len(unique)


def _await_visible(admin: AdminClient, bindings: list[AclBinding]) -> None:
    anything: Any = None  # the stubs type a filter's name, principal and host as str only
    every = AclBindingFilter(
        ResourceType.ANY, anything, ResourcePatternType.ANY, anything, anything,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    wanted = set(bindings)
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        seen = set(admin.describe_acls(every, request_timeout=TIMEOUT_S).result())
        if wanted <= seen:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(wanted - seen)} created ACLs not visible after {TIMEOUT_S}s")
        time.sleep(0.1)


def role_password(admin: KafkaCredentials, role: str) -> str:
    """The password of process role ``role``'s user, derived from the admin's: stable, stored
    nowhere, known to whoever holds the admin's."""
    digest = hmac.new(admin.password.encode(), f"horae-role:{role}".encode(), hashlib.sha256)
    return digest.hexdigest()


def provision_roles(
    bootstrap: str, admin: KafkaCredentials, prefix: str, tenants: Iterable[str] = ()
) -> dict[str, KafkaCredentials]:
    """As ``admin``: create (or reset) the user of every process role (:func:`role_password`)
    and the ACLs of the roles and of ``tenants`` under ``prefix``; each role's credentials."""
    roles = {role: KafkaCredentials(role, role_password(admin, role)) for role in ROLES}
    upsert_scram_users(bootstrap, admin, {c.username: c.password for c in roles.values()})
    client = AdminClient(client_config(bootstrap, {"log_level": 3}, credentials=admin))
    apply_acls(client, all_bindings(prefix, tenants))
    return roles
