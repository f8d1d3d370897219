"""A tenant's dead letters (``/v1/dead-letters``, :mod:`horae.api.dead_letters`) on the
in-memory backend, its rows made by the projector's own mapper from DLQ records: the list and
its filters, one dead letter with its order, a redrive (dry run, the order it sends, its
lineage and audit), and every route refusing another tenant's dead letters."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from horae.api.dead_letters import redrive_audit_id
from horae.contracts import events as ev
from horae.contracts.codec import default_codec
from horae.contracts.topics import Topic
from horae.projections.rows import STAGE_COLUMNS, Batch, RecordMapper, Stage
from horae.projections.synthetic import fire
from horae.streams.dispatcher.conclude import H_DLQ_CAUSE
from horae.streams.dispatcher.records import H_BASE, H_REDRIVE
from tests.unit.api.support import NOW, Api, cron, make_api

DLQ = "horae.dlq"


def order(tenant: str, trigger_id: str, minutes: int) -> ev.DispatchOrder:
    f = fire(tenant, trigger_id, NOW - timedelta(hours=2, minutes=-minutes))
    return ev.DispatchOrder(
        fire=f,
        target=ev.Target(kind=ev.TargetKind.WEBHOOK, url="https://hooks.acme.example/x"),
        lane=ev.Lane.ON_TIME,
        attempt=3,
        not_before=f.due_at,
        retry=ev.RetryPolicy(max_attempts=3),
        payload=b"{}",
    )


def dead_rows(records: list[tuple[ev.DispatchOrder, int, str]]) -> list[dict[str, Any]]:
    """The read model's rows of DLQ records (order, offset, cause), by the projector's mapper."""
    mapper = RecordMapper(default_codec(), {DLQ: Topic.DLQ})
    batch = Batch()
    for o, offset, cause in records:
        ts = int((NOW - timedelta(minutes=60 - offset)).timestamp() * 1000)
        headers = [(H_DLQ_CAUSE, cause.encode())]
        value = default_codec().encode(o)
        mapper.add(batch, DLQ, 1, offset, o.fire.fire_key.encode(), value, ts, headers)
    columns = STAGE_COLUMNS[Stage.DEAD_LETTERS]
    return [dict(zip(columns, row, strict=True)) for row in batch.rows[Stage.DEAD_LETTERS]]


def seeded() -> Api:
    api = make_api()
    for tenant, trigger_id, env in (("acme", "a1", "prod"), ("acme", "a2", "dev")):
        body = cron(trigger_id, labels={"env": env})
        assert api.client.post("/v1/schedules", json=body, headers=api.headers(tenant)).is_success
    api.backend.dead_letter_rows += dead_rows(
        [
            (order("acme", "a1", 1), 10, "exhausted: HTTP 503"),
            (order("acme", "a2", 2), 11, "failed: HTTP 410"),
            (order("acme", "a1", 3), 12, "exhausted: timeout"),
            (order("globex", "g1", 4), 13, "exhausted: HTTP 503"),
        ]
    )
    return api


def get(api: Api, path: str, tenant: str = "acme", **params: Any) -> Any:
    return api.client.get(path, params=params, headers=api.headers(tenant, "read"))


def redrive(api: Api, tenant: str = "acme", **body: Any) -> Any:
    return api.client.post("/v1/redrives", json=body, headers=api.headers(tenant))


def test_the_mapper_keeps_cause_lineage_and_the_record() -> None:
    o = order("acme", "a1", 1)
    mapper = RecordMapper(default_codec(), {DLQ: Topic.DLQ})
    batch = Batch()
    headers = [(H_DLQ_CAUSE, b"exhausted: HTTP 503"), (H_REDRIVE, f"{DLQ}:1:4".encode())]
    mapper.add(batch, DLQ, 1, 9, b"k", default_codec().encode(o), 1_000, headers)
    (row,) = batch.rows[Stage.DEAD_LETTERS]
    shown = dict(zip(STAGE_COLUMNS[Stage.DEAD_LETTERS], row, strict=True))
    assert shown["dlq_id"] == "1-9" and shown["link"] == f"{DLQ}:1:9"
    assert shown["cause"] == "exhausted: HTTP 503" and shown["redrive_of"] == f"{DLQ}:1:4"
    assert shown["fire_key"] == o.fire.fire_key and shown["attempt"] == 3
    assert default_codec().decode(shown["record"], ev.DispatchOrder) == o


def test_list_filters_and_pages() -> None:
    api = seeded()
    page = get(api, "/v1/dead-letters").json()
    assert [i["id"] for i in page["items"]] == ["1-10", "1-11", "1-12"]
    first = page["items"][0]
    assert (first["trigger_id"], first["attempts"], first["state"]) == ("a1", 3, "dead")
    assert first["cause"] == "exhausted: HTTP 503" and first["redrive_of"] is None
    by = {
        "trigger_id=a1": get(api, "/v1/dead-letters", trigger_id="a1"),
        "selector": get(api, "/v1/dead-letters", selector="env=dev"),
        "cause": get(api, "/v1/dead-letters", cause="timeout"),
    }
    assert [i["id"] for i in by["trigger_id=a1"].json()["items"]] == ["1-10", "1-12"]
    assert [i["id"] for i in by["selector"].json()["items"]] == ["1-11"]
    assert [i["id"] for i in by["cause"].json()["items"]] == ["1-12"]
    one = get(api, "/v1/dead-letters", limit=2).json()
    assert len(one["items"]) == 2 and one["next_cursor"]
    rest = get(api, "/v1/dead-letters", limit=2, cursor=one["next_cursor"]).json()
    assert [i["id"] for i in rest["items"]] == ["1-12"] and rest["next_cursor"] is None
    bad = get(api, "/v1/dead-letters", selector="env")
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "selector"


def test_show_one_with_its_order() -> None:
    api = seeded()
    r = get(api, "/v1/dead-letters/1-11")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["trigger_id"] == "a2" and body["order"]["max_attempts"] == 3
    assert body["order"]["target"]["url"] == "https://hooks.acme.example/x"
    assert get(api, "/v1/dead-letters/1-99").status_code == 404
    assert get(api, "/v1/dead-letters/not-an-id").status_code == 422


def test_redrive_dry_run_then_the_order_keeps_the_key_and_links_back() -> None:
    api = seeded()
    dry = redrive(api, trigger_id="a1", dry_run=True)
    assert dry.status_code == 200, dry.text
    assert dry.json() == {"dry_run": True, "matched": 2, "ids": ["1-10", "1-12"]}
    assert api.backend.orders == []
    done = redrive(api, trigger_id="a1", request_id="rd-1")
    assert done.status_code == 200, done.text
    assert [s["id"] for s in done.json()["redriven"]] == ["1-10", "1-12"]
    (sent, partition, headers), _ = api.backend.orders
    dead = order("acme", "a1", 1)
    assert sent.fire == dead.fire and sent.lane is ev.Lane.RETRY and sent.attempt == 4
    assert partition == 1
    assert dict(headers)[H_REDRIVE] == f"{DLQ}:1:10".encode()
    assert dict(headers)[H_BASE] == b"3"
    audits = api.backend.audits
    assert [a.action for a in audits] == ["dlq.redrive", "dlq.redrive"]
    assert audits[0].audit_id == redrive_audit_id(f"{DLQ}:1:10", "rd-1")
    assert audits[0].detail["dlq"] == f"{DLQ}:1:10" and audits[0].role is ev.Role.AUTHOR
    assert audits[0].detail["fire_key"] == dead.fire.fire_key
    # the audit entries mark them redriven: a second redrive of dead ones finds none
    listed = get(api, "/v1/dead-letters", trigger_id="a1").json()["items"]
    assert {i["state"] for i in listed} == {"redriven"}
    assert redrive(api, trigger_id="a1", dry_run=True).json()["matched"] == 0
    assert get(api, "/v1/dead-letters", state="redriven").json()["items"][0]["id"] == "1-10"


def test_redrive_needs_a_filter_and_a_request_id() -> None:
    api = seeded()
    r = redrive(api, dry_run=True)
    assert r.status_code == 422 and "name the dead letters" in r.json()["detail"]
    r = redrive(api, ids=["1-10"])
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "request_id"
    r = api.client.post(
        "/v1/redrives",
        json={"ids": ["1-10"], "request_id": "x"},
        headers=api.headers("acme", "read"),
    )
    assert r.status_code == 403 and api.backend.orders == []


def test_another_tenants_dead_letters_are_out_of_reach() -> None:
    """globex lists only its own; acme's ids are 404 to show and to redrive; acme's trigger
    ids and labels select nothing of acme's for globex."""
    api = seeded()
    mine = get(api, "/v1/dead-letters", "globex").json()["items"]
    assert [i["id"] for i in mine] == ["1-13"]
    assert get(api, "/v1/dead-letters/1-10", "globex").status_code == 404
    assert get(api, "/v1/dead-letters/1-13", "acme").status_code == 404
    assert redrive(api, "globex", ids=["1-10"], dry_run=True).status_code == 404
    assert redrive(api, "globex", ids=["1-10"], request_id="steal").status_code == 404
    assert redrive(api, "globex", trigger_id="a1", dry_run=True).json()["matched"] == 0
    assert redrive(api, "globex", selector="env=prod", dry_run=True).json()["matched"] == 0
    done = redrive(api, "globex", cause="HTTP 503", request_id="mine").json()
    assert [s["id"] for s in done["redriven"]] == ["1-13"]
    assert {o.fire.tenant for o, _, _ in api.backend.orders} == {"globex"}
