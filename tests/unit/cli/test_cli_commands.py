"""The tenant CLI (``horae triggers ...``, ``history``, ``lateness``, ``backfill``, ``apply``,
``diff``) run through its entry point against the API app in-process (in-memory ports, a
virtual clock): what it prints, what it sends, its exit codes."""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from horae.api.client import ApiClient, Page
from horae.api.verification import expected_answer
from horae.cli import connect as cli_connect
from horae.cli.main import main
from horae.contracts import events as ev
from horae.settings import Settings
from tests.net import free_ports
from tests.unit.api.support import NOW, Api, make_api

URL = "https://hooks.acme.example/x"


def connect(app: Api, monkeypatch: pytest.MonkeyPatch) -> Api:
    """The CLI's client talks to ``app`` with an author + policy token (or ``--token`` as
    given, ``none`` for no token)."""

    def open_client(settings: Settings, args: argparse.Namespace) -> ApiClient:
        token = args.client_token or app.token("acme", ["author", "policy"])
        return ApiClient("", None if token == "none" else token, http=app.client)

    monkeypatch.setattr(cli_connect, "open_client", open_client)
    return app


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    """The app in-process (every write projected at once), the CLI connected to it."""
    yield connect(make_api(), monkeypatch)


def horae(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def create(capsys: pytest.CaptureFixture[str], trigger_id: str = "nightly") -> None:
    code, _, err = horae(
        capsys, "triggers", "create", trigger_id, "--cron", "0 9 * * *", "--zone",
        "Europe/Berlin", "--url", URL, "--secret-ref", "acme-hook", "--label", "team=ops",
    )  # fmt: skip
    assert code == 0, err


def test_create_list_show(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    create(capsys)
    produced = api.backend.definitions[-1]
    assert produced.trigger_id == "nightly" and produced.labels == {"team": "ops"}
    assert produced.target.secret_refs == ("acme-hook",)
    code, out, _ = horae(capsys, "triggers", "list")
    assert code == 0
    header, row = out.splitlines()
    assert header.split() == [
        "ID", "STATE", "VERSION", "SCHEDULE", "TARGET", "NEXT", "LAST_RUN", "LAST_STATE"
    ]  # fmt: skip
    assert row.split() == [
        "nightly", "live", "1", "cron", "0", "9", "*", "*", "*", "Europe/Berlin", "POST", URL,
        "2026-06-02T07:00:00Z", "-", "-",
    ]  # fmt: skip
    code, out, _ = horae(capsys, "triggers", "list", "--json")
    assert code == 0 and [t["trigger_id"] for t in json.loads(out)] == ["nightly"]
    code, out, _ = horae(capsys, "triggers", "list", "--label", "team:other")
    assert code == 0 and out.splitlines() == [
        "ID  STATE  VERSION  SCHEDULE  TARGET  NEXT  LAST_RUN  LAST_STATE"
    ]
    code, out, _ = horae(capsys, "triggers", "show", "nightly")
    assert code == 0
    assert "schedule     cron 0 9 * * * Europe/Berlin" in out.splitlines()
    code, out, _ = horae(capsys, "triggers", "show", "nightly", "--json")
    assert json.loads(out)["version"] == 1


def test_a_refusal_prints_the_problem_and_its_field_errors(
    api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = horae(
        capsys, "triggers", "create", "bad", "--cron", "61 * * * *", "--url", URL,
        "--secret-ref", "acme-hook",
    )  # fmt: skip
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert lines[0].startswith("horae triggers create: ") and "(422)" in lines[0]
    assert "recurrence" in err
    code, _, err = horae(capsys, "triggers", "show", "nope")
    assert code == 1 and "(404)" in err


def test_without_a_token_401_says_how_to_get_one(
    api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = horae(capsys, "triggers", "list", "--token", "none")
    assert code == 1 and "(401)" in err and "horae tokens issue" in err
    forged = api.token("acme", ["author"])[:-4] + "AAAA"
    code, out, err = horae(capsys, "triggers", "list", "--token", forged)
    assert code == 1 and "(401)" in err
    assert forged not in out + err and forged[-20:] not in out + err  # never echoed


def test_a_read_token_may_not_write(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    create(capsys)
    token = api.token("acme", ["read"])
    code, _, err = horae(capsys, "triggers", "pause", "nightly", "--token", token)
    assert code == 1 and "(403)" in err
    assert horae(capsys, "triggers", "show", "nightly", "--token", token)[0] == 0


def test_amend_sets_fields_with_if_match(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    create(capsys)
    code, out, err = horae(
        capsys, "triggers", "amend", "nightly", "--set", "policies.misfire=skip",
        "--set", "policies.jitter_s=30",
    )  # fmt: skip
    assert code == 0, err
    assert out.splitlines() == [
        "amended nightly: version 1 -> 2",
        "  policies.jitter_s: 0 -> 30",
        "  policies.misfire: fire_once -> skip",
    ]
    latest = api.backend.definitions[-1]
    assert latest.version == 2 and latest.policies.misfire is ev.Misfire.SKIP
    assert latest.labels == {"team": "ops"}  # what was not set is kept
    code, _, err = horae(capsys, "triggers", "amend", "nightly", "--set", "description=x",
                         "--if-version", "1")  # fmt: skip
    assert code == 1 and "(412)" in err and "version 2" in err
    code, _, err = horae(capsys, "triggers", "amend", "nightly", "--set", "policies.misfire=skip")
    assert code == 0 and "nothing to change" in err
    assert api.backend.definitions[-1].version == 2


def test_pause_resume_run_delete(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    create(capsys)
    for act, kind in (("pause", "pause"), ("resume", "resume"), ("run", "manual_run")):
        code, out, err = horae(capsys, "triggers", act, "nightly")
        assert code == 0, err
        command, _ = api.backend.commands[-1]
        assert command.kind.value == kind and command.command_id in out
    assert "fire " in out and "fire None" not in out
    code, out, _ = horae(capsys, "triggers", "run", "nightly", "--json")
    assert set(json.loads(out)) == {"command_id", "fire_key"}
    code, out, _ = horae(capsys, "triggers", "delete", "nightly")
    assert code == 0 and out == "deleted nightly\n"
    assert api.backend.definitions[-1].state is ev.DefinitionState.DELETED
    code, out, _ = horae(capsys, "triggers", "list")
    assert out.splitlines()[1:] == []


def _fire(n: int, state: str = "fired", lateness_ms: int = 10) -> dict[str, object]:
    at = NOW - timedelta(hours=n)
    return {
        "tenant": "acme", "trigger_id": "nightly", "fire_key": f"acme/nightly/{n}",
        "scheduled_at": at, "due_at": at, "state": state, "lane": "on_time",
        "lateness_ms": lateness_ms, "cause": None if state == "fired" else "misfire: skip",
        "tzdata_version": "2025b", "outcome": "succeeded" if state == "fired" else None,
    }  # fmt: skip


def test_history_and_lateness(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    create(capsys)
    api.backend.fire_rows += [_fire(1), _fire(2, "skipped", 0), _fire(3, lateness_ms=30)]
    code, out, err = horae(capsys, "history", "nightly")
    assert code == 0, err
    rows = [line.split() for line in out.splitlines()]
    assert rows[0][:3] == ["SCHEDULED", "DUE", "STATE"]
    assert [r[2] for r in rows[1:]] == ["fired", "skipped", "fired"]  # oldest first
    assert rows[1][-2:] == ["succeeded", "acme/nightly/3"]
    code, out, _ = horae(capsys, "history", "nightly", "--state", "skipped", "--json")
    assert [f["fire_key"] for f in json.loads(out)] == ["acme/nightly/2"]
    code, out, _ = horae(capsys, "history", "nightly", "--limit", "1")
    assert len(out.splitlines()) == 2
    code, out, _ = horae(capsys, "lateness")
    assert code == 0
    assert [line.split() for line in out.splitlines()][1:] == [
        ["*", "3", "10", "29.6", "30", "1"],
        ["nightly", "3", "10", "29.6", "30", "1"],
    ]
    code, out, _ = horae(capsys, "lateness", "nightly")
    assert out.splitlines()[1].split()[0] == "nightly"
    assert horae(capsys, "history", "nope")[0] == 1


def test_backfill_prints_the_cost_and_asks(
    api: Api, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    create(capsys)
    window = ("--from", "2026-05-28T00:00:00Z", "--to", "2026-05-31T00:00:00Z")
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    code, out, err = horae(capsys, "backfill", "nightly", *window)
    assert code == 1 and "3 fire(s)" in out and "not confirmed" in err
    assert api.backend.commands == []
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    code, out, err = horae(capsys, "backfill", "nightly", *window, "--reason", "outage")
    assert code == 0, err
    command, _ = api.backend.commands[-1]
    assert command.kind is ev.CommandKind.BACKFILL and command.command_id in out
    assert command.reason == "outage"
    assert command.backfill_from is not None and command.backfill_from.day == 28
    code, out, _ = horae(capsys, "backfill", "nightly", *window, "--yes", "--json")
    assert code == 0 and json.loads(out)["fires"] == 3
    author = api.token("acme", ["author"])
    code, _, err = horae(capsys, "backfill", "nightly", *window, "--yes", "--token", author)
    assert code == 1 and "(403)" in err


def test_an_unreachable_api_is_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    [port] = free_ports(1)
    code, _, err = horae(capsys, "triggers", "list", "--api-url", f"http://127.0.0.1:{port}")
    assert code == 1 and "does not answer" in err


NIGHTLY = f"""\
id: nightly
recurrence: {{kind: cron, expr: "0 9 * * *", zone: Europe/Berlin}}
target: {{kind: webhook, url: "{URL}", secret_refs: [acme-hook]}}
labels: {{team: ops}}
"""
HOURLY = {
    "id": "hourly",
    "recurrence": {"kind": "cron", "expr": "0 * * * *"},
    "target": {"kind": "webhook", "url": URL, "secret_refs": ["acme-hook"]},
    "policies": {"misfire": "skip"},
}


def test_diff_and_apply_are_idempotent(
    api: Api, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "nightly.yaml").write_text(NIGHTLY)
    (tmp_path / "hourly.json").write_text(json.dumps(HOURLY))
    code, out, _ = horae(capsys, "diff", "-f", str(tmp_path))
    assert code == 2
    assert out.splitlines() == [
        "+ create hourly",
        "+ create nightly",
        "Plan: 2 to create, 0 to change, 0 to delete.",
    ]
    monkeypatch.setattr("sys.stdin", io.StringIO("no\n"))
    code, _, err = horae(capsys, "apply", "-f", str(tmp_path))
    assert code == 1 and "not applied" in err and api.backend.definitions == []
    code, out, err = horae(capsys, "apply", "-f", str(tmp_path), "--yes")
    assert code == 0, err
    assert out.splitlines()[-3:] == ["created hourly", "created nightly", "Applied: 2 step(s)."]
    assert sorted(d.trigger_id for d in api.backend.definitions) == ["hourly", "nightly"]
    for command in ("diff", "apply"):
        code, out, _ = horae(capsys, command, "-f", str(tmp_path))
        assert code == 0 and out == "No changes.\n"
    assert len(api.backend.definitions) == 2

    (tmp_path / "hourly.json").write_text(json.dumps({**HOURLY, "policies": {}}))
    (tmp_path / "nightly.yaml").unlink()
    code, out, _ = horae(capsys, "diff", "-f", str(tmp_path), "--json")
    assert code == 2
    assert json.loads(out) == {
        "steps": [
            {
                "action": "change",
                "id": "hourly",
                "version": 1,
                "changes": [{"path": "policies.misfire", "before": "skip", "after": "fire_once"}],
            }
        ],
        "kept": ["nightly"],
    }
    code, out, err = horae(capsys, "apply", "-f", str(tmp_path), "--prune", "--yes")
    assert code == 0, err
    assert "~ change hourly (version 1)" in out and "- delete nightly (version 1)" in out
    hourly = [d for d in api.backend.definitions if d.trigger_id == "hourly"][-1]
    assert hourly.version == 2 and hourly.policies.misfire is ev.Misfire.FIRE_ONCE
    assert horae(capsys, "diff", "-f", str(tmp_path), "--prune")[:2] == (0, "No changes.\n")


def test_apply_stops_at_a_refused_step(
    api: Api, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = {**HOURLY, "id": "a-bad", "recurrence": {"kind": "cron", "expr": "61 * * * *"}}
    (tmp_path / "t.json").write_text(json.dumps([bad, {**HOURLY, "id": "b-good"}]))
    code, out, err = horae(capsys, "apply", "-f", str(tmp_path), "--yes")
    assert code == 1 and "create a-bad failed after 0 step(s) done" in err and "(422)" in err
    assert "+ create a-bad" in out and "created" not in out
    assert api.backend.definitions == []


def test_a_bad_document_is_named(
    api: Api, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "t.yaml").write_text(NIGHTLY + "colour: blue\n")
    code, _, err = horae(capsys, "diff", "-f", str(tmp_path / "t.yaml"))
    assert code == 1 and f"{tmp_path / 't.yaml'}: colour: unknown field" in err


def test_a_second_apply_within_the_read_models_lag_plans_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listing is the read model; the ids it lacks are read one by one (read-your-writes)."""
    api = connect(make_api(auto_project=False), monkeypatch)
    (tmp_path / "nightly.yaml").write_text(NIGHTLY)
    assert horae(capsys, "apply", "-f", str(tmp_path), "--yes")[0] == 0
    assert horae(capsys, "triggers", "list")[1].splitlines()[1:] == []  # not projected yet
    assert horae(capsys, "diff", "-f", str(tmp_path))[:2] == (0, "No changes.\n")
    api.backend.project()
    assert horae(capsys, "diff", "-f", str(tmp_path))[:2] == (0, "No changes.\n")
    assert len(api.backend.definitions) == 1


def test_create_and_amend_from_a_document(
    api: Api, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "nightly.yaml"
    path.write_text(NIGHTLY)
    code, out, err = horae(capsys, "triggers", "create", "-f", str(path))
    assert code == 0, err
    assert out.startswith("created nightly: version 1")
    path.write_text(NIGHTLY.replace("labels: {team: ops}", "labels: {team: data}"))
    code, out, err = horae(capsys, "triggers", "amend", "nightly", "-f", str(path))
    assert code == 0, err
    assert out.splitlines() == ["amended nightly: version 1 -> 2", "  labels.team: ops -> data"]
    assert api.backend.definitions[-1].labels == {"team": "data"}
    code, _, err = horae(capsys, "triggers", "amend", "other", "-f", str(path))
    assert code == 2 and "the document's id 'nightly' is not 'other'" in err
    code, _, err = horae(capsys, "triggers", "create")
    assert code == 2 and "ID (the trigger id) or -f FILE is required" in err
    code, _, err = horae(capsys, "triggers", "amend", "nightly")
    assert code == 2 and "-f FILE or --set PATH=VALUE is required" in err


def test_prune_with_a_label_deletes_only_among_its_triggers(
    api: Api, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    create(capsys, "ops-old")  # labelled team=ops
    code, _, err = horae(
        capsys, "triggers", "create", "data-job", "--every", "3600", "--topic", "events.acme",
        "--label", "team=data",
    )  # fmt: skip
    assert code == 0, err
    (tmp_path / "nightly.yaml").write_text(NIGHTLY)  # team=ops
    code, out, _ = horae(capsys, "apply", "-f", str(tmp_path), "--prune", "--label", "team:ops",
                         "--yes")  # fmt: skip
    assert code == 0
    assert "- delete ops-old (version 1)" in out and "data-job" not in out
    code, out, _ = horae(capsys, "triggers", "list", "--json")
    assert sorted(t["trigger_id"] for t in json.loads(out)) == ["data-job", "nightly"]


def test_next_instants_with_local_time(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    create(capsys)  # 09:00 Europe/Berlin
    code, out, err = horae(capsys, "triggers", "next", "nightly", "-n", "2")
    assert code == 0, err
    assert [line.split() for line in out.splitlines()] == [
        ["UTC", "LOCAL", "OFFSET", "DST", "JITTER_MS"],
        ["2026-06-02T07:00:00Z", "2026-06-02T09:00:00+02:00", "+02:00", "-", "0"],
        ["2026-06-03T07:00:00Z", "2026-06-03T09:00:00+02:00", "+02:00", "-", "0"],
    ]
    code, _, err = horae(capsys, "triggers", "next", "nightly", "-n", "0")
    assert code == 1 and "(422)" in err


def test_export_prints_documents_apply_reads_back_unchanged(
    api: Api, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    create(capsys)
    code, _, err = horae(
        capsys, "triggers", "create", "every-min", "--cron", "* * * * *", "--topic",
        "events.acme", "--description", "on: yes",
    )  # fmt: skip
    assert code == 0, err
    assert horae(capsys, "triggers", "amend", "nightly", "--set", "policies.misfire=skip")[0] == 0
    code, out, err = horae(capsys, "triggers", "export")
    assert code == 0, err
    assert out.split("---\n")[1] == NIGHTLY.replace(
        "labels: {team: ops}\n", "policies:\n  misfire: skip\nlabels:\n  team: ops\n"
    ).replace("recurrence: {kind: cron, expr: \"0 9 * * *\", zone: Europe/Berlin}\n",
              "recurrence:\n  kind: cron\n  expr: 0 9 * * *\n  zone: Europe/Berlin\n").replace(
        f'target: {{kind: webhook, url: "{URL}", secret_refs: [acme-hook]}}\n',
        f"target:\n  kind: webhook\n  url: {URL}\n  secret_refs:\n  - acme-hook\n",
    )  # fmt: skip
    (tmp_path / "all.yaml").write_text(out)
    assert horae(capsys, "diff", "-f", str(tmp_path), "--prune")[:2] == (0, "No changes.\n")
    code, out, _ = horae(capsys, "triggers", "export", "every-min", "--json")
    assert json.loads(out) == [
        {
            "id": "every-min",
            "recurrence": {"kind": "cron", "expr": "* * * * *"},
            "target": {"kind": "event", "topic": "events.acme"},
            "description": "on: yes",
        }
    ]


def test_apply_from_stdin_needs_yes(
    api: Api, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(NIGHTLY))
    code, _, err = horae(capsys, "apply", "-f", "-")
    assert code == 2 and "add --yes" in err and api.backend.definitions == []
    monkeypatch.setattr("sys.stdin", io.StringIO(NIGHTLY))
    code, out, err = horae(capsys, "apply", "-f", "-", "--yes")
    assert code == 0, err
    assert "created nightly" in out and api.backend.definitions[-1].trigger_id == "nightly"


def test_a_stored_field_this_cli_does_not_know_stops_the_plan(
    api: Api, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(capsys)
    newer = {**json.loads(horae(capsys, "triggers", "show", "nightly", "--json")[1])}
    newer["recurrence"] = {**newer["recurrence"], "leap_policy": "smear"}
    monkeypatch.setattr(ApiClient, "list_page", lambda self, **_: Page([newer], None))
    (tmp_path / "nightly.yaml").write_text(NIGHTLY)
    code, out, err = horae(capsys, "diff", "-f", str(tmp_path))
    assert code == 1 and out == ""
    assert "stored trigger 'nightly': recurrence.leap_policy: unknown field" in err
    assert "upgrade" in err


def test_verify_a_webhook_host(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    url = "https://new-hooks.example/x"
    code, out, err = horae(capsys, "triggers", "create", "n", "--cron", "0 9 * * *",
                           "--url", url, "--secret-ref", "acme-hook")  # fmt: skip
    assert code == 1 and "not verified" in err
    code, out, err = horae(capsys, "targets", "verify", url, "--json")
    assert code == 0, err
    made = json.loads(out)
    assert made["host"] == "new-hooks.example"
    code, out, err = horae(capsys, "targets", "verify", url)
    assert code == 0
    assert out.startswith("host new-hooks.example: serve the answer at https://new-hooks.example/")
    assert out.splitlines()[-1] == "then: horae targets check new-hooks.example"
    challenge = out.split("challenge ")[1].split()[0]
    well_known = out.split("serve the answer at ")[1].split()[0]
    code, out, err = horae(capsys, "targets", "check", "new-hooks.example")
    assert code == 1 and "not verified" in err and "404" in err
    answer = expected_answer("whsec_a", "acme", "new-hooks.example", challenge)
    api.served[well_known] = (200, answer.encode())
    code, out, err = horae(capsys, "targets", "check", "new-hooks.example")
    assert code == 0, err
    assert out.startswith("host new-hooks.example: verified until ")
    code, _, err = horae(capsys, "triggers", "create", "n", "--cron", "0 9 * * *",
                         "--url", url, "--secret-ref", "acme-hook")  # fmt: skip
    assert code == 0, err
    code, _, err = horae(capsys, "targets", "check", "never-asked.example")
    assert code == 1 and "(404)" in err


def test_states_in_list_show_history_and_the_state_filter(
    api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    create(capsys)
    create(capsys, "done")
    api.backend.applied("acme", "nightly", "paused")
    api.backend.applied("acme", "done", "completed")
    code, out, _ = horae(capsys, "triggers", "list")
    assert [line.split()[:2] for line in out.splitlines()[1:]] == [
        ["done", "completed"],
        ["nightly", "paused"],
    ]
    assert not any(line.endswith("Z") for line in out.splitlines()[1:])  # no next instant
    for state in ("completed", "paused"):
        code, out, _ = horae(capsys, "triggers", "list", "--state", state)
        assert code == 0 and [line.split()[1] for line in out.splitlines()[1:]] == [state]
    assert horae(capsys, "triggers", "list", "--state", "live")[1].count("\n") == 1
    code, out, _ = horae(capsys, "history", "done")
    assert code == 0
    assert out.splitlines()[-1] == "done is completed: its recurrence has no instant left"

    api.backend.suspended.add("acme")
    code, out, _ = horae(capsys, "triggers", "list", "--state", "suspended")
    assert [line.split()[:2] for line in out.splitlines()[1:]] == [
        ["done", "suspended"],
        ["nightly", "suspended"],
    ]
    code, out, _ = horae(capsys, "triggers", "show", "nightly")
    assert "state        suspended (run state paused)" in out.splitlines()
    code, out, _ = horae(capsys, "history", "nightly")
    assert out.splitlines()[-1].startswith("nightly is suspended with its tenant")
    code, out, _ = horae(capsys, "history", "nightly", "--json")
    assert json.loads(out) == []


def test_apply_manages_the_pause_declaratively(
    api: Api, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A document's ``state`` applies (planned against the run state, shown by diff); without
    one the stored state is kept; export writes a paused trigger's state."""
    path = tmp_path / "nightly.yaml"
    path.write_text(NIGHTLY + "state: paused\n")
    code, out, err = horae(capsys, "apply", "-f", str(path), "--yes")
    assert code == 0 and "created nightly" in out, err
    assert api.backend.definitions[-1].state is ev.DefinitionState.PAUSED
    assert horae(capsys, "diff", "-f", str(path))[:2] == (0, "No changes.\n")
    code, out, _ = horae(capsys, "triggers", "export", "--json")
    assert json.loads(out)[0]["state"] == "paused"

    path.write_text(NIGHTLY)  # no state: the pause is kept
    assert horae(capsys, "diff", "-f", str(path))[:2] == (0, "No changes.\n")
    path.write_text(NIGHTLY.replace("team: ops", "team: dev"))
    assert horae(capsys, "apply", "-f", str(path), "--yes")[0] == 0
    assert api.backend.definitions[-1].state is ev.DefinitionState.PAUSED  # still paused

    path.write_text(NIGHTLY.replace("team: ops", "team: dev") + "state: live\n")
    code, out, _ = horae(capsys, "diff", "-f", str(path))
    assert code == 2 and out.splitlines()[:2] == [
        "~ change nightly (version 2)",
        "    state: paused -> live",
    ]
    assert horae(capsys, "apply", "-f", str(path), "--yes")[0] == 0
    assert api.backend.definitions[-1].state is ev.DefinitionState.LIVE
    assert horae(capsys, "diff", "-f", str(path))[:2] == (0, "No changes.\n")

    api.backend.applied("acme", "nightly", "paused")  # a pause command: apply without a state
    path.write_text(NIGHTLY.replace("team: ops", "team: qa"))  # keeps it
    assert horae(capsys, "apply", "-f", str(path), "--yes")[0] == 0
    assert api.backend.definitions[-1].state is ev.DefinitionState.PAUSED
    path.write_text(NIGHTLY + "state: sleeping\n")
    code, _, err = horae(capsys, "diff", "-f", str(path))
    assert code == 1 and "state: 'sleeping': expected live or paused" in err
    code, out, _ = horae(capsys, "triggers", "amend", "nightly", "--set", "state=live")
    assert code == 0 and "  state: paused -> live" in out.splitlines()
    assert api.backend.definitions[-1].state is ev.DefinitionState.LIVE


def test_oidc_flag_asks_for_an_identity_token_on_webhooks_only(
    api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ("triggers", "create", "--every", "60", "--secret-ref", "acme-hook")
    code, _, err = horae(capsys, *base, "--url", URL, "--oidc", "nightly")
    assert code == 0, err
    assert api.backend.definitions[-1].target.oidc == ev.OidcToken(audience=None)
    code, _, err = horae(
        capsys, *base, "--url", URL, "--oidc-audience", "https://aud.example", "aud"
    )
    assert code == 0, err
    assert api.backend.definitions[-1].target.oidc == ev.OidcToken("https://aud.example")
    code, _, err = horae(capsys, *base, "--topic", "events.acme", "--oidc", "ev")
    assert code == 2 and "--oidc: identity tokens go on webhook calls only" in err


def test_document_flags_beside_a_file_are_refused(
    api: Api, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc = tmp_path / "t.yaml"
    doc.write_text(
        f"id: filed\nrecurrence: {{kind: every, interval_s: 60}}\ntarget: {{url: {URL}}}\n"
    )
    code, _, err = horae(capsys, "triggers", "create", "-f", str(doc), "--every", "0", "--oidc")
    assert code == 2 and "-f FILE holds the whole document: --every, --oidc too" in err
    assert api.backend.definitions == []
