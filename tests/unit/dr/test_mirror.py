"""MirrorMaker 2's configuration as Horae writes it: which topics and groups go, the identity
policy, committed reads, exactly-once; MM2's source offsets as the lag reads them; the DR state."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from horae.contracts.topics import CATALOGUE, events_topic
from horae.dr import DrError
from horae.dr.mirror import IDENTITY, _take, flow, groups_pattern, mirrored, topics_pattern
from horae.dr.regions import DrState, Region, other, read_state, region, write_state
from horae.settings import DrSettings, Settings

PREFIX = "horae."


def _region(tmp_path: Path, name: str, dr: DrSettings | None = None) -> Region:
    settings = Settings(
        kafka_bootstrap=None, database_url=None, state_dir=tmp_path, dr=dr or DrSettings()
    )
    r = region(settings, name)
    r.kafka.password_file.parent.mkdir(parents=True, exist_ok=True)
    r.kafka.password_file.write_text(f'pw-{name}\\"x\n')  # a backslash and a quote
    return r


def _properties(text: str) -> dict[str, str]:
    """``key = value`` lines read back as java.util.Properties does for these (a backslash
    escapes the next character)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition(" = ")
            out[key] = re.sub(r"\\(.)", r"\1", value)
    return out


def test_every_topic_of_the_catalogue_and_every_tenants_events_go() -> None:
    for spec in CATALOGUE:
        if not spec.per_tenant:
            assert mirrored(spec.name(PREFIX), PREFIX), spec.name(PREFIX)
    assert mirrored(events_topic("acme.eu", PREFIX), PREFIX)
    assert mirrored(events_topic("acme", PREFIX) + ".billing", PREFIX)


@pytest.mark.parametrize(
    "name",
    [
        "horae.planner-snapshots",  # a cache naming the source's offsets: rebuilt instead
        "horae.planner-clock",  # the clock gate's probe, each region its own
        "horae.events",  # no topic has the family's bare name
        "other.fires",  # another deployment's prefix
        "horaeXfires",  # the prefix's dot is a dot
        "horae.fires.copy",
        "mm2-offsets.a.internal",
        "__consumer_offsets",
    ],
)
def test_what_stays_behind(name: str) -> None:
    assert not mirrored(name, PREFIX)


def test_the_groups_translated() -> None:
    pattern = re.compile(groups_pattern(PREFIX))
    for group in ("horae.planner", "horae.dispatcher", "horae.tenant.acme.reports"):
        assert pattern.fullmatch(group), group
    for group in ("horae.projector.main", "horae-dlq", "horae.plannerX", "other.planner"):
        assert not pattern.fullmatch(group), group


def test_the_properties_of_a_flow(tmp_path: Path) -> None:
    a, b = _region(tmp_path, "a"), _region(tmp_path, "b")
    props = _properties(flow(a, b, tmp_path / "dr", tmp_path / "cache").properties())
    assert props["clusters"] == "a, b"
    assert props["a->b.enabled"] == "true" and props["b->a.enabled"] == "false"
    assert props["replication.policy.class"] == IDENTITY
    assert props["a.consumer.isolation.level"] == "read_committed"
    # read back as Java reads it, the regex is the one tested above
    assert props["a->b.topics"] == topics_pattern(PREFIX)
    assert props["a->b.groups"] == groups_pattern(PREFIX)
    assert props["a.bootstrap.servers"] == a.bootstrap
    assert props["b.bootstrap.servers"] == b.bootstrap
    assert 'password="pw-b\\\\\\"x"' in props["b.sasl.jaas.config"]  # JAAS-quoted
    assert props["b.exactly.once.source.support"] == "enabled"
    assert props["dedicated.mode.enable.internal.rest"] == "true"
    assert props["sync.group.offsets.enabled"] == "true"
    assert props["b.offset.storage.topic"] == "mm2-offsets.a.internal"
    plain = _properties(flow(a, b, tmp_path / "dr2", tmp_path / "cache", eos=False).properties())
    assert "b.exactly.once.source.support" not in plain


def test_mm2_source_offsets_as_the_lag_reads_them() -> None:
    out: dict[tuple[str, int], int] = {}
    key = json.dumps(["MirrorSourceConnector", {"cluster": "a", "partition": 2, "topic": "t"}])
    _take(out, key.encode(), b'{"offset": 41}', "a")
    assert out == {("t", 2): 42}  # the next offset to replicate
    other_cluster = key.replace('"a"', '"b"').encode()
    _take(out, other_cluster, b'{"offset": 7}', "a")
    _take(out, b'["MirrorCheckpointConnector", {}]', b'{"offset": 7}', "a")
    _take(out, b"not json", b"{}", "a")
    assert out == {("t", 2): 42}
    _take(out, key.encode(), None, "a")  # a tombstone forgets it
    assert out == {}


def test_the_dr_state_and_the_regions(tmp_path: Path) -> None:
    assert read_state(tmp_path) == DrState(active="a")
    write_state(tmp_path, DrState("b", ({"from": "a", "to": "b"},)))
    assert read_state(tmp_path) == DrState("b", ({"from": "a", "to": "b"},))
    assert other("a") == "b" and other("b") == "a"
    with pytest.raises(DrError, match="unknown region 'c'"):
        other("c")


def test_a_region_keeps_its_ports(tmp_path: Path) -> None:
    first = _region(tmp_path, "a")
    again = _region(tmp_path, "a")
    assert first.bootstrap == again.bootstrap
    assert first.bootstrap != _region(tmp_path, "b").bootstrap


def test_only_the_listed_tenants_events_and_groups_go() -> None:
    listed = ("acme", "beta.eu")
    assert mirrored(events_topic("acme", PREFIX), PREFIX, listed)
    assert mirrored(events_topic("acme", PREFIX) + ".billing", PREFIX, listed)
    assert mirrored(events_topic("beta.eu", PREFIX), PREFIX, listed)
    for stranger in ("acme2", "beta", "zeta"):
        assert not mirrored(events_topic(stranger, PREFIX), PREFIX, listed), stranger
    assert mirrored("horae.fires", PREFIX, listed)  # the catalogue goes whoever is listed
    assert not mirrored(events_topic("acme", PREFIX), PREFIX, ())  # nobody's
    assert mirrored("horae.fires", PREFIX, ())
    groups = re.compile(groups_pattern(PREFIX, listed))
    assert groups.fullmatch("horae.tenant.acme.reports") and groups.fullmatch("horae.planner")
    assert not groups.fullmatch("horae.tenant.zeta.reports")


def test_the_flow_takes_the_tenants_from_the_settings(tmp_path: Path) -> None:
    a = _region(tmp_path, "a", DrSettings(tenant_events="acme"))
    b = _region(tmp_path, "b")
    props = _properties(flow(a, b, tmp_path / "dr", tmp_path / "cache").properties())
    assert re.fullmatch(props["a->b.topics"], events_topic("acme", PREFIX))
    assert not re.fullmatch(props["a->b.topics"], events_topic("zeta", PREFIX))


@pytest.mark.parametrize("value", ["acme,", "Acme", "acme, *", ""])
def test_a_tenant_list_that_names_no_tenant_is_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="is not a tenant id"):
        DrSettings(tenant_events=value)
