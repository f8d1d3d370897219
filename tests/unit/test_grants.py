"""The grants table and the checks built on it: roles come from the signing key only."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from horae.contracts import events as ev
from horae.contracts import signing
from horae.contracts.grants import REQUIRED, Act, Grants, TenantGrant
from horae.settings import Settings

R = ev.Role
AT = datetime(2026, 1, 1, tzinfo=UTC)
GRANTS = Grants(
    roles={
        "acme": {
            "acme-author": frozenset({R.AUTHOR}),
            "acme-policy": frozenset({R.AUTHOR, R.POLICY}),
            "acme-read": frozenset({R.READ}),
        }
    },
    tenants={"acme": TenantGrant(horizon_max_s=7 * 86_400, backfill_max_fires=5_000)},
)
DOCS = Path(__file__).resolve().parents[2] / "docs"


def definition(key_id: str, **fields: object) -> ev.TriggerDefinition:
    d = ev.TriggerDefinition(
        tenant="acme",
        trigger_id="nightly",
        version=1,
        state=ev.DefinitionState.LIVE,
        recurrence=ev.Recurrence(kind=ev.RecurrenceKind.CRON, expr="0 3 * * *"),
        target=ev.Target(kind=ev.TargetKind.WEBHOOK, url="https://h.example/x"),
        authored_at=AT,
        author="alice",
    )
    return signing.sign(replace(d, **fields), key_id, b"unused")  # type: ignore[arg-type]


def command(key_id: str, kind: ev.CommandKind, role: R, trigger_id: str = "nightly") -> ev.Command:
    c = ev.Command("c1", "acme", trigger_id, kind, "alice", role, AT)
    return signing.sign(c, key_id, b"unused")


def test_the_table_in_code_is_the_table_in_the_docs() -> None:
    for page in ("security.md", "contracts.md"):
        rows = re.findall(r"^\| `([a-z_.]+)` \| `([a-z]+)` \|", (DOCS / page).read_text(), re.M)
        assert {Act(a): R(r) for a, r in rows} == dict(REQUIRED), page


def test_privileged_acts_need_more_than_authorship() -> None:
    assert REQUIRED[Act.BACKFILL] is R.POLICY
    assert REQUIRED[Act.HORIZON_ABOVE_DEFAULT] is R.POLICY
    assert REQUIRED[Act.QUOTAS_ABOVE_DEFAULT] is R.POLICY
    assert REQUIRED[Act.TENANT_SUSPEND] is R.PLATFORM
    assert all(role is not R.READ for role in REQUIRED.values())


@pytest.mark.parametrize(
    ("key_id", "kind", "declared", "needed"),
    [
        ("acme-author", ev.CommandKind.BACKFILL, R.POLICY, "policy"),  # declares, not granted
        ("acme-author", ev.CommandKind.BACKFILL, R.PLATFORM, "policy"),
        ("acme-read", ev.CommandKind.MANUAL_RUN, R.READ, "author"),
        ("acme-read", ev.CommandKind.PAUSE, R.AUTHOR, "author"),
        ("acme-policy", ev.CommandKind.MANUAL_RUN, R.PLATFORM, "platform"),  # body lies
    ],
)
def test_a_command_is_forbidden_unless_its_key_grants_the_role(
    key_id: str, kind: ev.CommandKind, declared: R, needed: str
) -> None:
    refused = GRANTS.check_command(command(key_id, kind, declared))
    assert refused is not None and refused.cause == "forbidden"
    assert f"'{needed}'" in refused.detail and f"key {key_id!r} grants" in refused.detail


def test_a_command_allowed_by_its_key() -> None:
    assert GRANTS.check_command(command("acme-policy", ev.CommandKind.BACKFILL, R.POLICY)) is None
    assert GRANTS.check_command(command("acme-author", ev.CommandKind.MANUAL_RUN, R.AUTHOR)) is None
    platform = command("horae-platform", ev.CommandKind.PAUSE, R.PLATFORM, ev.TENANT_WIDE)
    assert GRANTS.check_command(platform) is None


def test_only_the_platform_key_suspends_a_tenant() -> None:
    c = command("acme-policy", ev.CommandKind.PAUSE, R.POLICY, ev.TENANT_WIDE)
    refused = GRANTS.check_command(c)
    assert (
        refused is not None and refused.act is Act.TENANT_SUSPEND and refused.needed is R.PLATFORM
    )


def test_a_key_absent_from_the_roles_grants_author_only() -> None:
    assert GRANTS.key_roles("acme", "acme-unlisted") == frozenset({R.AUTHOR})
    assert GRANTS.key_roles("acme", "horae-platform") == frozenset(R)


def test_definitions_acts_and_declared_roles() -> None:
    assert GRANTS.check_definition(definition("acme-author"), None) is None
    read = GRANTS.check_definition(definition("acme-read"), None)
    assert read is not None and read.act is Act.DEFINITION_CREATE and read.needed is R.AUTHOR
    prior = definition("acme-author")
    delete = definition("acme-read", version=2, state=ev.DefinitionState.DELETED)
    refused = GRANTS.check_definition(delete, prior)
    assert refused is not None and refused.act is Act.DEFINITION_DELETE
    lying = GRANTS.check_definition(definition("acme-author", role=R.PLATFORM), None)
    assert lying is not None and "declares role 'platform'" in lying.detail


def test_horizon_and_quotas_above_the_default_need_policy_and_stay_under_the_ceiling() -> None:
    three_days = ev.Policies(horizon_s=3 * 86_400)
    by_author = GRANTS.check_definition(definition("acme-author", policies=three_days), None)
    assert by_author is not None and by_author.act is Act.HORIZON_ABOVE_DEFAULT
    assert "needs role 'policy'" in by_author.detail
    assert GRANTS.check_definition(definition("acme-policy", policies=three_days), None) is None
    ten_days = ev.Policies(horizon_s=10 * 86_400)
    over = GRANTS.check_definition(definition("acme-policy", policies=ten_days), None)
    assert over is not None and "above the ceiling 604800" in over.detail
    quota = ev.Quotas(backfill_max_fires=6_000)
    over_quota = GRANTS.check_definition(definition("acme-policy", quotas=quota), None)
    assert over_quota is not None and over_quota.act is Act.QUOTAS_ABOVE_DEFAULT
    less = ev.Quotas(backfill_max_fires=10)
    assert GRANTS.check_definition(definition("acme-author", quotas=less), None) is None
    assert GRANTS.privileged_acts(definition("acme-policy", policies=three_days)) == [
        Act.HORIZON_ABOVE_DEFAULT
    ]


def test_a_tenant_without_a_grant_gets_the_defaults_as_ceilings() -> None:
    other = replace(definition("globex-1", policies=ev.Policies(horizon_s=86_401)), tenant="globex")
    roles = {"globex": {"globex-1": frozenset({R.AUTHOR, R.POLICY})}}
    refused = Grants(roles=roles).check_definition(other, None)
    assert refused is not None and "ceiling 86400" in refused.detail


def test_settings_read_roles_ceilings_and_per_tenant_secrets() -> None:
    s = Settings.model_validate(
        {
            "tenant_keys": {
                "acme": {"acme-1": "s1", "acme-p": {"secret": "s2", "roles": ["policy"]}}
            },
            "tenant_grants": {"acme": {"horizon_max_s": 3600}},
            "dispatcher": {"webhook_secrets": {"acme": {"main": "whsec_x"}}},
            "platform_key": "pk",
        }
    )
    g = s.grants()
    assert g.key_roles("acme", "acme-1") == frozenset({R.AUTHOR})
    assert g.key_roles("acme", "acme-p") == frozenset({R.POLICY})
    assert g.key_roles("acme", "horae-platform") == frozenset(R)
    assert g.grant("acme") == TenantGrant(horizon_max_s=3600)
    assert g.secret_refs == {"acme": frozenset({"main"})}
    assert s.tenant_key_bytes()["acme"] == {
        "acme-1": b"s1",
        "acme-p": b"s2",
        "horae-platform": b"pk",
    }


@pytest.mark.parametrize(
    "keys",
    [
        {"acme": {"acme-1": {"secret": "s", "roles": ["platform"]}}},  # only the platform key
        {"acme": {"horae-platform": "not-the-platform-key"}},  # posing as the platform key
        {"acme": {"k": "s"}, "globex": {"k": "t"}},  # one key id, two tenants
    ],
)
def test_settings_refuse_keys_that_would_lie_about_who_signed(keys: object) -> None:
    with pytest.raises(ValidationError):
        Settings.model_validate({"tenant_keys": keys, "platform_key": "pk"})
