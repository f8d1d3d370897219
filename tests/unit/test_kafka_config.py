"""The one Kafka client config builder, and the ACL tables (no broker needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType

from horae.kafka.acls import ROLES, role_bindings, tenant_bindings, tenant_principal
from horae.kafka.config import KafkaCredentials, client_config
from horae.kafka.connection import KafkaConnection, process_connection, use_connection
from horae.settings import Settings


@pytest.fixture(autouse=True)
def no_horae_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [n for n in os.environ if n.startswith("HORAE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HORAE_STATE_DIR", str(tmp_path / "state"))
    use_connection(None)


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


def test_sasl_ssl_with_a_ca_maps_to_librdkafka(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HORAE_KAFKA_BOOTSTRAP", "k1:9093,k2:9093")
    monkeypatch.setenv("HORAE_KAFKA_USERNAME", "planner")
    monkeypatch.setenv("HORAE_KAFKA_PASSWORD", "pw")
    monkeypatch.setenv("HORAE_KAFKA_SSL_CA_FILE", "/etc/horae/ca.pem")
    conn = KafkaConnection.from_settings(Settings())
    assert conn.security_protocol == "SASL_SSL"  # a CA and a user: SASL over TLS by default
    assert "pw" not in repr(conn)
    assert conn.config({"acks": "all"}) == {
        "bootstrap.servers": "k1:9093,k2:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "planner",
        "sasl.password": "pw",
        "ssl.ca.location": "/etc/horae/ca.pem",
        "acks": "all",
    }


def test_mutual_tls_needs_no_sasl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HORAE_KAFKA_BOOTSTRAP", "k:9093")
    monkeypatch.setenv("HORAE_KAFKA_SECURITY_PROTOCOL", "SSL")
    monkeypatch.setenv("HORAE_KAFKA_USERNAME", "ignored")  # SSL: the certificate is the principal
    monkeypatch.setenv("HORAE_KAFKA_SSL_CA_FILE", "/ca.pem")
    monkeypatch.setenv("HORAE_KAFKA_SSL_CERT_FILE", "/planner.pem")
    monkeypatch.setenv("HORAE_KAFKA_SSL_KEY_FILE", "/planner.key")
    assert KafkaConnection.from_settings(Settings()).config() == {
        "bootstrap.servers": "k:9093",
        "security.protocol": "SSL",
        "ssl.ca.location": "/ca.pem",
        "ssl.certificate.location": "/planner.pem",
        "ssl.key.location": "/planner.key",
    }


def test_the_protocol_and_mechanism_are_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HORAE_KAFKA_BOOTSTRAP", "k:9092")
    monkeypatch.setenv("HORAE_KAFKA_USERNAME", "u")
    monkeypatch.setenv("HORAE_KAFKA_SASL_MECHANISM", "SCRAM-SHA-256")
    conf = KafkaConnection.from_settings(Settings()).config()
    assert conf["security.protocol"] == "SASL_PLAINTEXT"  # today's default with a user
    assert (conf["sasl.mechanisms"], conf["sasl.password"]) == ("SCRAM-SHA-256", "")
    monkeypatch.setenv("HORAE_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")  # the system's CAs
    conf = KafkaConnection.from_settings(Settings()).config()
    assert conf["security.protocol"] == "SASL_SSL" and "ssl.ca.location" not in conf


def test_impossible_connections_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="needs a SASL user"):
        KafkaConnection("k:1", security_protocol="SASL_SSL")
    with pytest.raises(ValueError, match="needs its key"):
        KafkaConnection("k:1", security_protocol="SSL", ssl_cert_file=Path("/c.pem"))
    with pytest.raises(ValueError, match="has no TLS"):
        KafkaConnection("k:1", ssl_ca_file=Path("/ca.pem"))


def test_credentials_keep_the_connections_transport() -> None:
    tls = KafkaConnection("k:1", security_protocol="SSL", ssl_ca_file=Path("/ca.pem"))
    conf = client_config("k:2", credentials=KafkaCredentials("admin", "pw"), connection=tls)
    assert conf["bootstrap.servers"] == "k:2"
    assert (conf["security.protocol"], conf["ssl.ca.location"]) == ("SASL_SSL", "/ca.pem")
    conf = client_config("k:2", connection=tls.as_user(KafkaCredentials("a", "b")))
    assert conf["sasl.username"] == "a"
    anonymous = client_config(
        "k:2", authenticate=False, connection=tls.as_user(KafkaCredentials("a", "b"))
    )
    assert anonymous["security.protocol"] == "SSL" and "sasl.username" not in anonymous


def test_the_installed_connection_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HORAE_KAFKA_USERNAME", "planner")
    use_connection(KafkaConnection.from_settings(Settings()))
    monkeypatch.setenv("HORAE_KAFKA_USERNAME", "changed")  # the environment is not read again
    assert client_config("h:1")["sasl.username"] == "planner"
    assert process_connection("h:2").bootstrap == "h:2"
    use_connection(None)
    assert client_config("h:1")["sasl.username"] == "changed"


def test_the_local_tls_stack_is_found(tmp_path: Path) -> None:
    (tmp_path / "state" / "kafka").mkdir(parents=True)
    (tmp_path / "state" / "kafka" / "admin.password").write_text("pw\n")
    (tmp_path / "state" / "tls").mkdir()
    (tmp_path / "state" / "tls" / "ca.pem").write_text("")
    conf = client_config("127.0.0.1:19092")
    assert conf["security.protocol"] == "SASL_SSL"
    assert conf["ssl.ca.location"] == str(tmp_path / "state" / "tls" / "ca.pem")


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
