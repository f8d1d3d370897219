"""The local stack's shapes without starting it: 3 brokers, TLS, and the settings clients get."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from horae.database import with_tls
from horae.devstack.kafka import KafkaCluster, KafkaNode
from horae.devstack.stack import LocalStack
from horae.devstack.tls import make_ca, pem_property
from horae.settings import ApiSettings, DevSettings, Settings, env_name


def _settings(**dev: object) -> Settings:
    return Settings(kafka_bootstrap=None, database_url=None, dev=DevSettings(**dev))  # type: ignore[arg-type]


def test_three_brokers_are_three_voters(tmp_path: Path) -> None:
    stack = LocalStack.from_settings(
        _settings(kafka_port=100, kafka_controller_port=101, brokers=3), state_dir=tmp_path
    )
    cluster = stack.kafka
    assert isinstance(cluster, KafkaCluster)
    assert [(n.node_id, n.port, n.controller_port) for n in cluster.nodes] == [
        (1, 100, 101),
        (2, 102, 103),
        (3, 104, 105),
    ]
    assert cluster.bootstrap == "127.0.0.1:100,127.0.0.1:102,127.0.0.1:104"
    assert {n.password_file for n in cluster.nodes} == {tmp_path / "kafka" / "admin.password"}
    assert all(n.heap == "320m" and n.replication == 3 for n in cluster.nodes)
    node = cluster.nodes[1]
    node.home.mkdir(parents=True)
    node._write_config()
    config = node.config.read_text()
    assert "controller.quorum.voters=1@127.0.0.1:101,2@127.0.0.1:103,3@127.0.0.1:105" in config
    for line in ("min.insync.replicas=2", "default.replication.factor=3", "node.id=2"):
        assert line in config.splitlines()
    assert "transaction.state.log.min.isr=2" in config
    # a stack whose data holds three nodes stays three without the flag
    (tmp_path / "kafka" / "node-2" / "data").mkdir(parents=True)
    (tmp_path / "kafka" / "node-3" / "data").mkdir(parents=True)
    again = LocalStack.from_settings(_settings(kafka_port=100), state_dir=tmp_path)
    assert isinstance(again.kafka, KafkaCluster) and len(again.kafka.nodes) == 3


def test_explicit_node_ports(tmp_path: Path) -> None:
    settings = _settings(brokers=3, kafka_node_ports=[7, 8, 9, 10])
    cluster = LocalStack.from_settings(settings, state_dir=tmp_path).kafka
    assert isinstance(cluster, KafkaCluster)
    assert [(n.port, n.controller_port) for n in cluster.nodes[1:]] == [(7, 8), (9, 10)]


def test_one_broker_keeps_its_layout(tmp_path: Path) -> None:
    node = LocalStack.from_settings(_settings(), state_dir=tmp_path).kafka
    assert isinstance(node, KafkaNode) and node.home == tmp_path / "kafka"
    node.home.mkdir(parents=True)
    node._write_config()
    config = node.config.read_text()
    assert "controller.quorum.bootstrap.servers=127.0.0.1:19093" in config
    assert "listeners=SASL_PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093" in config
    assert "min.insync.replicas=1" in config and "ssl." not in config


def test_tls_material_and_broker_config(tmp_path: Path) -> None:
    stack = LocalStack.from_settings(_settings(tls=True), state_dir=tmp_path)
    assert stack.tls is not None
    material = make_ca(stack.tls.home)
    proc = subprocess.run(
        ["openssl", "verify", "-CAfile", str(material.ca), str(material.cert)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    text = subprocess.run(
        ["openssl", "x509", "-noout", "-ext", "subjectAltName", "-in", str(material.cert)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "IP Address:127.0.0.1" in text and "DNS:localhost" in text
    assert oct(material.key.stat().st_mode & 0o777) == "0o600"
    assert make_ca(stack.tls.home).ca.read_text() == material.ca.read_text()  # kept, not remade
    node = stack.kafka
    assert isinstance(node, KafkaNode)
    node.home.mkdir(parents=True)
    node._write_config()
    config = node.config.read_text().splitlines()
    assert "listeners=SASL_SSL://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093" in config
    assert "listener.security.protocol.map=CONTROLLER:SASL_SSL,SASL_SSL:SASL_SSL" in config
    assert f"ssl.truststore.certificates={pem_property(material.ca)}" in config
    env = stack.client_env()
    assert env["HORAE_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
    assert env["HORAE_KAFKA_SSL_CA_FILE"] == env["HORAE_DATABASE_SSL_CA_FILE"] == str(material.ca)
    assert "sslmode=verify-full" in stack.endpoints.database_url
    connection = stack.kafka_connection()
    assert connection is not None and connection.security_protocol == "SASL_SSL"
    assert connection.ssl_ca_file == material.ca and connection.sasl_mechanism == "SCRAM-SHA-512"


def test_database_tls_is_added_to_every_url() -> None:
    assert with_tls("postgresql://u@h/db", None, None) == "postgresql://u@h/db"
    assert with_tls("", "require", None) == ""
    url = with_tls("postgresql://u@h/db?sslmode=disable", "verify-full", Path("/ca.pem"))
    assert "sslmode=verify-full" in url and "sslrootcert=/ca.pem" in url
    settings = Settings(
        database_url="postgresql://horae@db:5432/horae",
        database_sslmode="verify-ca",
        database_ssl_ca_file=Path("/ca.pem"),
        projector_database_url="postgresql://p:pw@db/horae",
    )
    from horae.cli.projections import database_urls

    urls = database_urls(settings, "postgresql://horae@db:5432/horae")
    for url in (urls.owner, urls.projector, urls.reader, urls.api):
        assert "sslmode=verify-ca" in url and "sslrootcert=/ca.pem" in url, url


@pytest.mark.parametrize(
    ("field", "name"),
    [("tls_cert_file", "HORAE_API_TLS_CERT_FILE"), ("tls_key_file", "HORAE_API_TLS_KEY_FILE")],
)
def test_the_api_tls_settings_names(field: str, name: str) -> None:
    assert env_name(ApiSettings, field) == name
