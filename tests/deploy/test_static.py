"""Static checks of deploy/, every run, in seconds once the tools are cached (scripts/deploy-tools
installs them): the chart lints strictly and renders over every value set in
deploy/helm/horae/ci/; every rendered manifest and every raw one validates with kubeconform
-strict against the Kubernetes schemas, offline; the compose file resolves with podman-compose
config; the chart's copy of the topic catalogue and ACLs is the code's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.deploy.tools import DEPLOY, deploy_tools, run

CHART = DEPLOY / "helm" / "horae"
VALUE_SETS = sorted((CHART / "ci").glob("*-values.yaml"))
# custom resources whose schemas Kubernetes does not ship (Prometheus operator, Strimzi)
CUSTOM_KINDS = "ServiceMonitor,PodMonitor,KafkaTopic,KafkaUser"


def _kubeconform(paths: list[Path]) -> str:
    tools = deploy_tools()
    location = (
        tools["KUBERNETES_SCHEMAS"]
        + "/{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}"
        + "/{{ .ResourceKind }}{{ .KindSuffix }}.json"
    )
    return run(
        [
            tools["KUBECONFORM"],
            "-strict",
            "-summary",
            "-kubernetes-version",
            tools["KUBERNETES_VERSION"],
            "-skip",
            CUSTOM_KINDS,
            "-schema-location",
            location,
            *paths,
        ]
    )


def _render(values: Path) -> str:
    tools = deploy_tools()
    return run(
        [
            tools["HELM"],
            "template",
            "horae",
            CHART,
            "--namespace",
            "horae",
            "--kube-version",
            tools["KUBERNETES_VERSION"],
            "-f",
            values,
        ]
    )


def test_value_sets_exist() -> None:
    assert len(VALUE_SETS) >= 3, VALUE_SETS


@pytest.mark.parametrize("values", VALUE_SETS, ids=lambda p: p.name)
def test_chart_lints_and_renders_valid_manifests(values: Path, tmp_path: Path) -> None:
    tools = deploy_tools()
    run([tools["HELM"], "lint", "--strict", CHART, "-f", values])
    rendered = _render(values)
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    kinds = {d["kind"] for d in docs}
    assert {"StatefulSet", "Deployment", "PodDisruptionBudget", "Service"} <= kinds
    out = tmp_path / "rendered.yaml"
    out.write_text(rendered)
    summary = _kubeconform([out])
    assert "Invalid: 0, Errors: 0" in summary, summary


def _docs(values: Path) -> list[dict[str, object]]:
    return [d for d in yaml.safe_load_all(_render(values)) if d]


def _env(container: dict[str, object]) -> dict[str, object]:
    return {e["name"]: e for e in container["env"]}  # type: ignore[attr-defined,index]


def test_chart_keeps_its_contract() -> None:
    """The shape docs/operations.md relies on: the planner slot is the pod name, secrets only by
    reference, drain-sized grace periods, the migration as a pre-install/upgrade hook, the
    dispatcher the only pod with egress beyond Kafka, PostgreSQL and DNS."""
    docs = _docs(CHART / "ci" / "default-values.yaml")
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs}  # type: ignore[index]
    planner = by[("StatefulSet", "horae-planner")]["spec"]["template"]["spec"]  # type: ignore[index]
    env = _env(planner["containers"][0])
    assert env["HORAE_PLANNER_SLOT"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert planner["terminationGracePeriodSeconds"] >= 10 + 10
    dispatcher = by[("Deployment", "horae-dispatcher")]["spec"]["template"]["spec"]  # type: ignore[index]
    assert dispatcher["terminationGracePeriodSeconds"] >= 30 + 1 + 10
    for doc in docs:
        assert doc["kind"] != "Secret"
        spec = doc.get("spec", {})
        template = spec.get("template", {}).get("spec", {}) if isinstance(spec, dict) else {}
        for c in [*template.get("containers", []), *template.get("initContainers", [])]:
            for e in c.get("env", []):
                if any(w in e["name"] for w in ("PASSWORD", "KEY", "SECRET", "DATABASE_URL")):
                    assert "valueFrom" in e, f"{doc['metadata']['name']}: {e['name']} inline"
            assert c["securityContext"]["readOnlyRootFilesystem"] is True
    job = next(d for d in docs if d["kind"] == "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"  # type: ignore[index]
    policies = {d["metadata"]["name"]: d for d in docs if d["kind"] == "NetworkPolicy"}  # type: ignore[index]
    wide = {
        name
        for name, p in policies.items()
        for rule in p["spec"]["egress"]  # type: ignore[index]
        for peer in rule.get("to", [])
        if peer.get("ipBlock", {}).get("cidr") == "0.0.0.0/0"
    }
    assert wide == {"horae-dispatcher"}


def test_raw_manifests_validate() -> None:
    """Kubernetes manifests kept as files in deploy/ (none outside the chart yet: the chart's
    own ci/ values are not manifests) validate too."""
    raw = [
        p
        for p in DEPLOY.rglob("*.yaml")
        if "helm" not in p.parts and p.parent.name != "compose" and "kind:" in p.read_text()
    ]
    if raw:
        summary = _kubeconform(raw)
        assert "Invalid: 0, Errors: 0" in summary, summary


def test_kubeconform_catches_a_broken_manifest(tmp_path: Path) -> None:
    """The validation is not vacuous: an unknown field and a wrong type are refused."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"
        "spec: {replicas: one, selectr: {}, template: {metadata: {}, spec: {containers: []}}}\n"
    )
    tools = deploy_tools()
    done = subprocess.run(
        [
            tools["KUBECONFORM"],
            "-strict",
            "-kubernetes-version",
            tools["KUBERNETES_VERSION"],
            "-schema-location",
            tools["KUBERNETES_SCHEMAS"]
            + "/{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}"
            + "/{{ .ResourceKind }}{{ .KindSuffix }}.json",
            bad,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0 and "selectr" in done.stdout, done.stdout + done.stderr


def test_compose_config_resolves(tmp_path: Path) -> None:
    tools = deploy_tools()
    example = DEPLOY / "compose" / "env.example"
    env = dict(line.split("=", 1) for line in example.read_text().splitlines() if "=" in line)
    env = {k: v or "x" for k, v in env.items() if not k.startswith("#")}
    env["KAFKA_CLUSTER_ID"] = "HXk3b1Vq5Qp2mZt9aB7cDw"
    out = run(
        [tools["PODMAN_COMPOSE"], "-f", DEPLOY / "compose" / "compose.yaml", "config"],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env},
        cwd=tmp_path,
    )
    services = yaml.safe_load(out)["services"]
    assert {f"kafka-{n}" for n in (1, 2, 3)} <= set(services)
    assert {"planner-1", "planner-2", "dispatcher-1", "dispatcher-2", "projector"} <= set(services)
    assert {"api-1", "api-2", "api", "topics", "migrate", "postgres"} <= set(services)
    assert all(s["network_mode"] == "host" for s in services.values())
    slots = {services[p]["environment"]["HORAE_PLANNER_SLOT"] for p in ("planner-1", "planner-2")}
    assert len(slots) == 2


def test_chart_catalogue_is_the_codes() -> None:
    run([sys.executable, DEPLOY / "tools" / "catalogue.py", "--check"])
