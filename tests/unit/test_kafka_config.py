"""The one Kafka client config builder, and the ACL tables (no broker needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType

from horae.kafka.acls import ROLES, role_bindings, tenant_bindings, tenant_principal
from horae.kafka.config import KafkaCredentials, client_config


@pytest.fixture(autouse=True)
def no_horae_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [n for n in os.environ if n.startswith("HORAE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HORAE_STATE_DIR", str(tmp_path / "state"))


def test_credentials_turn_on_sasl_scram() -> None:
    creds = KafkaCredentials("planner", "pw")
    conf = client_config("h:1", {"group.id": "g"}, credentials=creds)
    assert conf == {
        "bootstrap.servers": "h:1",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "planner",
        "sasl.password": "pw",
        "group.id": "g",
    }
    assert "pw" not in repr(creds)


def test_settings_name_the_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HORAE_KAFKA_USERNAME", "dispatcher")
    monkeypatch.setenv("HORAE_KAFKA_PASSWORD", "secret")
    conf = client_config("h:1")
    assert (conf["sasl.username"], conf["sasl.password"]) == ("dispatcher", "secret")


def test_no_user_and_an_external_broker_is_plaintext(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HORAE_KAFKA_BOOTSTRAP", "h:1")
    assert client_config("h:1", {"acks": "all"}) == {"bootstrap.servers": "h:1", "acks": "all"}


def test_the_local_stack_admin_is_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert "sasl.username" not in client_config("h:1")  # no local stack yet
    (tmp_path / "state" / "kafka").mkdir(parents=True)
    (tmp_path / "state" / "kafka" / "admin.password").write_text("pw\n")
    conf = client_config("h:1")
    assert (conf["sasl.username"], conf["sasl.password"]) == ("admin", "pw")
    monkeypatch.setenv("HORAE_KAFKA_BOOTSTRAP", "127.0.0.1:19092")  # the local stack's address
    assert client_config("h:1")["sasl.username"] == "admin"
    monkeypatch.setenv("HORAE_KAFKA_BOOTSTRAP", "kafka.example:9092")  # another broker: not sent
    assert "sasl.username" not in client_config("h:1")


def _grants(bindings: list[object]) -> set[tuple[str, str, str, str]]:
    return {
        (b.restype.name, b.name, b.resource_pattern_type.name, b.operation.name)  # type: ignore[attr-defined]
        for b in bindings
    }


def test_a_tenant_reads_only_its_own_events_and_writes_only_ingress() -> None:
    got = _grants(tenant_bindings("acme.eu", "p."))
    reads = {(n, pat) for t, n, pat, op in got if t == "TOPIC" and op == "READ"}
    writes = {n for t, n, _, op in got if t == "TOPIC" and op == "WRITE"}
    assert reads == {("p.events.acmeDeu", "LITERAL"), ("p.events.acmeDeu.", "PREFIXED")}
    assert writes == {"p.definitions", "p.commands"}
    assert {(t, n, pat) for t, n, pat, op in got if t != "TOPIC"} == {
        ("GROUP", "p.tenant.acmeDeu.", "PREFIXED")
    }
    assert tenant_principal("acme.eu") == "tenant.acmeDeu"


@pytest.mark.parametrize("role", ROLES)
def test_no_role_writes_what_it_must_not(role: str) -> None:
    bindings = role_bindings(role, "p.")
    assert all(b.principal == f"User:{role}" for b in bindings)
    assert all(b.operation is not AclOperation.ALL for b in bindings)
    writes = {
        b.name
        for b in bindings
        if b.restype is ResourceType.TOPIC and b.operation is AclOperation.WRITE
    }
    if role != "planner":
        assert "p.definitions.accepted" not in writes and "p.planner-state" not in writes
    if role == "projector":
        assert writes == set()
    prefixed = [b for b in bindings if b.resource_pattern_type is ResourcePatternType.PREFIXED]
    assert all(b.name.startswith("p.") or b.name == "horae-dlq" for b in prefixed)


def test_the_planner_reads_the_outcomes_overlap_needs() -> None:
    reads = {
        b.name
        for b in role_bindings("planner", "p.")
        if b.restype is ResourceType.TOPIC and b.operation is AclOperation.READ
    }
    assert "p.outcomes" in reads
