"""Which URL each database role connects with (no database needed)."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict

from horae.projections.roles import DatabaseUrls, Login, as_role

OWNER = "postgresql://owner:owner-secret@db.example:5433/horae?sslmode=require"


def test_default_roles_use_the_owner_database_without_its_password() -> None:
    urls = DatabaseUrls.resolve(OWNER, None, None)
    projector, reader = conninfo_to_dict(urls.projector), conninfo_to_dict(urls.reader)
    for parts in (projector, reader):
        assert parts["host"] == "db.example" and parts["port"] == "5433"
        assert parts["dbname"] == "horae" and parts["sslmode"] == "require"
        assert "password" not in parts
    assert (projector["user"], reader["user"]) == ("horae_projector", "horae_reader")
    assert urls.roles().projector == Login("horae_projector")


def test_configured_urls_win_and_carry_their_passwords() -> None:
    urls = DatabaseUrls.resolve(
        OWNER, "postgresql://writer:w-pass@db.example/horae", "postgresql://viewer@db.example/horae"
    )
    roles = urls.roles()
    assert roles.projector == Login("writer", "w-pass")
    assert roles.reader == Login("viewer", None)
    for text in (repr(urls), repr(roles)):
        assert "w-pass" not in text and "owner-secret" not in text


def test_a_role_url_must_name_its_user() -> None:
    with pytest.raises(ValueError, match="must name its user"):
        Login.from_url("postgresql://db.example/horae")
    assert conninfo_to_dict(as_role("host=h dbname=d user=u", "r"))["user"] == "r"
