"""The create and edit forms' webhook target: whether its host is verified for the tenant."""

from __future__ import annotations

import html
import re
from datetime import timedelta

from tests.unit.api.support import NOW, Api
from tests.unit.console.test_console import seeded, signed_in


def words_of(page: str) -> str:
    """The page's text: tags left out (a link's address kept in brackets), spaces folded."""
    page = re.sub(r'<a href="([^"]*)"[^>]*>', r"[\1] ", page)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", page)).split())


def status(api: Api, url: str) -> str:
    got = api.client.get("/console/target-status", params={"url": url})
    assert got.status_code == 200, got.text
    return words_of(got.text)


def test_the_form_says_whether_the_host_is_verified_and_how_to_verify_it() -> None:
    api = seeded()
    signed_in(api, "acme", "author")
    said = status(api, "https://hooks.acme.example/x")
    assert "verified Host hooks.acme.example is verified for tenant acme until" in said
    said = status(api, "https://other.example:8443/x")
    assert "not verified Host other.example:8443 is not verified for tenant acme" in said
    assert "the API refuses a webhook schedule calling it" in said
    assert (
        "[/console/targets?url=https%3A//other.example%3A8443/x] verify other.example:8443" in said
    )
    assert "horae targets verify https://other.example:8443/x" in said
    assert "Not a webhook URL" in status(api, "ftp://files.example/")
    api.verifications.verified("acme", "old.example", NOW - timedelta(days=1))
    assert "(expired)" in status(api, "https://old.example/hook")

    new = api.client.get("/console/new").text
    assert 'id="target-status"' in new and "Type the webhook URL" in words_of(new)
    edit = words_of(api.client.get("/console/schedules/nightly/edit").text)
    assert "Host hooks.acme.example is verified for tenant acme" in edit


def test_another_tenants_verification_is_not_this_ones() -> None:
    api = seeded()
    signed_in(api, "globex", "author")
    assert "is not verified for tenant globex" in status(api, "https://hooks.acme.example/x")
