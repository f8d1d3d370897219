"""Target ownership verification: an unverified host is refused with how to verify; the
challenge answered with the HMAC of a tenant's webhook secret verifies it, for a while."""

from __future__ import annotations

from datetime import timedelta

from horae.api.verification import expected_answer, host_of
from tests.unit.api.support import cron, make_api

URL = "https://new.example:8443/hook"
TARGET = {"kind": "webhook", "url": URL, "secret_refs": ["acme-hook"]}


def test_host_of() -> None:
    assert host_of("https://Hooks.Example./x?y") == ("hooks.example", "https://hooks.example")
    assert host_of(URL) == ("new.example:8443", "https://new.example:8443")
    v6 = ("[2606:4700::1]:8443", "https://[2606:4700::1]:8443")
    assert host_of("https://[2606:4700:0:0::1]:8443/x") == v6
    assert host_of("http://[2606:4700::1]/x") == ("[2606:4700::1]", "http://[2606:4700::1]")


def test_a_public_ipv6_literal_can_be_verified() -> None:
    """urlsplit drops the brackets of an IPv6 literal: the host and its well-known URL keep them,
    so the check fetches a URL that parses, and a trigger at the literal is accepted after."""
    api = make_api()
    h = api.headers()
    url = "https://[2606:4700::1]:8443/hook"
    target = {**TARGET, "url": url}
    assert api.client.post("/v1/schedules", json=cron(target=target), headers=h).status_code == 422
    made = api.client.post("/v1/targets/verifications", json={"url": url}, headers=h)
    assert made.status_code == 201, made.text
    challenge = made.json()
    assert challenge["host"] == "[2606:4700::1]:8443"
    well_known = challenge["well_known_url"]
    assert well_known.startswith("https://[2606:4700::1]:8443/.well-known/horae-verification/")
    answer = expected_answer("whsec_a", "acme", challenge["host"], challenge["challenge"])
    api.served[well_known] = (200, answer.encode())
    check = api.client.post(f"/v1/targets/verifications/{challenge['host']}/check", headers=h)
    assert check.status_code == 200 and check.json()["state"] == "verified", check.text
    created = api.client.post("/v1/schedules", json=cron(target=target), headers=h)
    assert created.status_code == 201, created.text


def test_an_unverified_host_is_refused_until_verified() -> None:
    api = make_api()
    h = api.headers()
    refused = api.client.post("/v1/schedules", json=cron(target=TARGET), headers=h)
    assert refused.status_code == 422
    assert "/v1/targets/verifications" in refused.json()["detail"]
    assert "new.example:8443" in refused.json()["detail"]
    made = api.client.post("/v1/targets/verifications", json={"url": URL}, headers=h)
    assert made.status_code == 201, made.text
    challenge = made.json()
    assert challenge["host"] == "new.example:8443"
    well_known = challenge["well_known_url"]
    assert (
        well_known
        == f"https://new.example:8443/.well-known/horae-verification/{challenge['challenge']}"
    )
    check = f"/v1/targets/verifications/{challenge['host']}/check"
    nothing = api.client.post(check, headers=h).json()
    assert nothing["state"] == "failed" and "404" in nothing["detail"]
    api.served[well_known] = (200, b"not the answer")
    assert api.client.post(check, headers=h).json()["state"] == "failed"
    foreign = expected_answer("whsec_g", "acme", challenge["host"], challenge["challenge"])
    api.served[well_known] = (200, foreign.encode())  # globex's secret proves nothing for acme
    assert api.client.post(check, headers=h).json()["state"] == "failed"
    assert api.client.post("/v1/schedules", json=cron(target=TARGET), headers=h).status_code == 422
    answer = expected_answer("whsec_a", "acme", challenge["host"], challenge["challenge"])
    api.served[well_known] = (200, answer.encode() + b"\n")
    assert api.client.post(check, headers=api.headers("globex")).status_code == 404
    ok = api.client.post(check, headers=h).json()
    assert ok["state"] == "verified" and ok["verified_until"] == "2026-07-01T12:00:00Z"
    created = api.client.post("/v1/schedules", json=cron(target=TARGET), headers=h)
    assert created.status_code == 201, created.text
    other = api.headers("globex")
    body = cron(target={**TARGET, "secret_refs": ["g-hook"]})
    assert api.client.post("/v1/schedules", json=body, headers=other).status_code == 422
    api.clock.advance(timedelta(days=31).total_seconds())  # the verification expired
    again = api.client.post("/v1/schedules", json=cron("later", target=TARGET), headers=h)
    assert again.status_code == 422 and "not verified" in again.json()["detail"]


def test_challenges_need_a_public_url_and_expire() -> None:
    api = make_api()
    h = api.headers()
    internal = api.client.post(
        "/v1/targets/verifications", json={"url": "http://10.1.2.3/x"}, headers=h
    )
    assert internal.status_code == 422 and internal.json()["errors"][0]["field"] == "url"
    assert (
        api.client.post("/v1/targets/verifications", json={"url": 3}, headers=h).status_code == 422
    )
    made = api.client.post("/v1/targets/verifications", json={"url": URL}, headers=h).json()
    assert (
        api.client.post("/v1/targets/verifications/elsewhere.example/check", headers=h).status_code
        == 404
    )
    api.clock.advance(3601)
    late = api.client.post(f"/v1/targets/verifications/{made['host']}/check", headers=h)
    assert late.status_code == 422 and "expired" in late.json()["detail"]
    read = api.client.post(
        "/v1/targets/verifications", json={"url": URL}, headers=api.headers("acme", "read")
    )
    assert read.status_code == 403
