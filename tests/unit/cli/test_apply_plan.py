"""The plan of ``horae apply`` / ``horae diff``: field diffs, the pure planner (with properties:
applying a plan to the stored triggers gives the desired ones; a state planned against itself
plans nothing), executing a plan, reading documents and their full form."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from horae.cli.apply import (
    ABSENT,
    Change,
    Current,
    Doc,
    DocumentError,
    Plan,
    Step,
    _Loader,
    compact,
    diff,
    execute,
    normalize,
    plan,
    read_documents,
    to_yaml,
)


class MemoryStore:
    """Stored triggers by id with versions; amend refuses a stale version, like If-Match."""

    def __init__(self, current: dict[str, Current]) -> None:
        self.triggers = dict(current)

    def create(self, trigger_id: str, document: Doc) -> None:
        assert trigger_id not in self.triggers, "created twice"
        self.triggers[trigger_id] = Current(document, 1)

    def amend(self, trigger_id: str, document: Doc, version: int) -> None:
        held = self.triggers[trigger_id]
        if held.version != version:
            raise RuntimeError(f"412: {trigger_id} is at version {held.version}, not {version}")
        self.triggers[trigger_id] = Current(document, version + 1)

    def delete(self, trigger_id: str) -> None:
        del self.triggers[trigger_id]

    def documents(self) -> dict[str, Doc]:
        return {t: c.document for t, c in self.triggers.items()}


# --- diff ---------------------------------------------------------------------------------


def test_diff_names_each_changed_leaf_by_its_dotted_path() -> None:
    before = {"policies": {"misfire": "skip", "jitter_s": 0}, "labels": {"team": "ops"}}
    after = {"policies": {"misfire": "fire_once", "jitter_s": 0}, "labels": {"env": "prod"}}
    assert diff(before, after) == [
        Change("labels.env", ABSENT, "prod"),
        Change("labels.team", "ops", ABSENT),
        Change("policies.misfire", "skip", "fire_once"),
    ]
    assert diff(before, after)[2].line() == "policies.misfire: skip -> fire_once"
    assert Change("labels.env", ABSENT, "prod").line() == "labels.env: (absent) -> prod"


def test_diff_compares_lists_whole_and_types_strictly() -> None:
    assert diff({"a": [1, 2]}, {"a": [2, 1]}) == [Change("a", [1, 2], [2, 1])]
    assert diff({"a": True}, {"a": 1}) == [Change("a", True, 1)]
    assert diff({"a": {"b": 1}}, {"a": {"b": 1}}) == []


# --- plan ---------------------------------------------------------------------------------


def test_plan_creates_changes_and_keeps_or_prunes() -> None:
    current = {
        "same": Current({"x": 1}, 3),
        "moved": Current({"policies": {"misfire": "skip"}}, 7),
        "old": Current({"x": 0}, 2),
    }
    desired: dict[str, Doc] = {
        "same": {"x": 1},
        "moved": {"policies": {"misfire": "fire_once"}},
        "new": {"x": 2},
    }
    kept = plan(desired, current, prune=False)
    assert [(s.action, s.trigger_id, s.version) for s in kept.steps] == [
        ("change", "moved", 7),
        ("create", "new", None),
    ]
    assert kept.steps[0].changes == (Change("policies.misfire", "skip", "fire_once"),)
    assert kept.kept == ("old",)
    assert kept.lines() == [
        "~ change moved (version 7)",
        "    policies.misfire: skip -> fire_once",
        "+ create new",
        "  1 stored trigger(s) not in the files kept (old); --prune deletes them",
        "Plan: 1 to create, 1 to change, 0 to delete.",
    ]
    pruned = plan(desired, current, prune=True)
    assert pruned.steps[-1] == Step("delete", "old", version=2)
    assert pruned.kept == ()
    assert pruned.as_json()["steps"][0]["changes"] == [
        {"path": "policies.misfire", "before": "skip", "after": "fire_once"}
    ]


def test_an_empty_plan_says_so() -> None:
    result = plan({"a": {"x": 1}}, {"a": Current({"x": 1}, 1)}, prune=True)
    assert result.steps == () and result.lines() == ["No changes."]


ids = st.text(alphabet="abcxyz0-", min_size=1, max_size=4)
leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["skip", "fire_once", ""])
)
values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=2), st.dictionaries(st.sampled_from("pqr"), inner, max_size=3)
    ),
    max_leaves=8,
)
documents = st.dictionaries(st.sampled_from(["policies", "labels", "target", "x"]), values)
states = st.dictionaries(ids, documents, max_size=6)
versions = st.integers(1, 50)


@settings(deadline=None)  # file I/O and the schema walk: timing varies on a shared CI box
@given(states, st.dictionaries(ids, st.tuples(documents, versions), max_size=6))
def test_applying_the_plan_gives_the_desired_state(
    desired: dict[str, Doc], stored: dict[str, tuple[Doc, int]]
) -> None:
    current = {t: Current(doc, v) for t, (doc, v) in stored.items()}
    store = MemoryStore(current)
    result = plan(desired, current, prune=True)
    assert list(execute(result.steps, store)) == list(result.steps)
    assert store.documents() == desired
    # without --prune the triggers no document names stay as they were
    store = MemoryStore(current)
    list(execute(plan(desired, current, prune=False).steps, store))
    kept = {t: d for t, (d, _) in stored.items() if t not in desired}
    assert store.documents() == {**kept, **desired}


@settings(deadline=None)  # file I/O and the schema walk: timing varies on a shared CI box
@given(states, versions)
def test_a_state_planned_against_itself_plans_nothing(desired: dict[str, Doc], v: int) -> None:
    current = {t: Current(json.loads(json.dumps(d)), v) for t, d in desired.items()}
    assert plan(desired, current, prune=True).steps == ()


@settings(deadline=None)  # file I/O and the schema walk: timing varies on a shared CI box
@given(states, st.dictionaries(ids, st.tuples(documents, versions), max_size=6))
def test_a_second_plan_after_applying_is_empty(
    desired: dict[str, Doc], stored: dict[str, tuple[Doc, int]]
) -> None:
    store = MemoryStore({t: Current(doc, v) for t, (doc, v) in stored.items()})
    list(execute(plan(desired, store.triggers, prune=True).steps, store))
    assert plan(desired, store.triggers, prune=True).steps == ()


def test_execute_stops_at_the_first_refused_step() -> None:
    current = {"a": Current({"x": 1}, 2), "b": Current({"x": 1}, 1)}
    desired: dict[str, Doc] = {"a": {"x": 2}, "b": {"x": 2}}
    result = plan(desired, current, prune=False)
    store = MemoryStore(current)
    store.triggers["a"] = Current({"x": 9}, 3)  # changed after the plan read version 2
    done: list[Step] = []
    with pytest.raises(RuntimeError, match="412"):
        done.extend(execute(result.steps, store))
    assert done == [] and store.triggers["b"] == Current({"x": 1}, 1)


# --- documents ----------------------------------------------------------------------------

CRON = """\
id: nightly
recurrence: {kind: cron, expr: "0 2 * * *", zone: Europe/Paris, start: 2026-01-01T00:00:00+01:00}
target: {kind: webhook, url: "https://hooks.example.com/n", secret_refs: [acme-hook]}
policies: {misfire: skip}
"""


def test_reads_a_folder_of_yaml_and_json_with_multi_document_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(CRON + "---\nid: other\nx: 1\n---\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.json").write_text(json.dumps([{"id": "j1"}, {"id": "j2", "y": 2}]))
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "c.yaml").write_text("id: hidden\n")
    (tmp_path / "notes.txt").write_text("id: ignored\n")
    found = read_documents(str(tmp_path))
    assert sorted(found) == ["j1", "j2", "nightly", "other"]
    where, nightly = found["nightly"]
    assert where == f"{tmp_path / 'a.yaml'} (document 1)"
    # an instant stays the string it was written as (YAML would make it a datetime)
    assert nightly["recurrence"]["start"] == "2026-01-01T00:00:00+01:00"
    assert "id" not in nightly
    assert found["j2"] == (f"{tmp_path / 'sub' / 'b.json'} (document 2)", {"y": 2})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- 1\n- 2\n", "a trigger document is an object"),
        ("recurrence: {}\n", "id None"),
        ("id: Not_Valid\n", "id 'Not_Valid'"),
        ("id: a\n---\nid: a\n", "id 'a' is also in"),
        ("id: [unclosed\n", "not YAML"),
    ],
)
def test_bad_documents_are_refused_naming_where(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(DocumentError, match=message) as caught:
        read_documents(str(path))
    assert str(path) in str(caught.value)


def test_a_missing_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="no such file or folder"):
        read_documents(str(tmp_path / "nope"))


def _document() -> dict[str, Any]:
    doc = yaml.load(CRON, Loader=_Loader)  # the loader the files go through
    doc.pop("id")
    assert isinstance(doc, dict)
    return doc


def test_normalize_fills_defaults_and_normalizes_instants() -> None:
    full = normalize(_document())
    assert full["policies"]["misfire"] == "skip"
    assert full["policies"]["overlap"] == "allow"  # a default filled in
    assert full["policies"]["retry"]["base_s"] == 1.0
    assert full["recurrence"]["start"] == "2025-12-31T23:00:00Z"  # UTC
    assert full["payload"] == ""
    for name in ("tenant", "version", "state", "authored_at", "author", "trigger_id"):
        assert name not in full


def test_a_stored_trigger_and_its_document_have_one_full_form() -> None:
    document = _document()
    stored = {
        **normalize(document),
        "trigger_id": "nightly", "tenant": "acme", "version": 4, "state": "paused",
        "authored_at": "2026-01-01T00:00:00Z", "author": "ci", "role": "author",
        "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-02T00:00:00Z",
        "next_instants": ["2026-01-03T01:00:00Z"], "payload": {"base64": ""},
    }  # fmt: skip
    assert normalize(stored, stored=True) == normalize(document)
    changed = {**document, "policies": {"misfire": "fire_once"}}
    assert diff(normalize(stored, stored=True), normalize(changed)) == [
        Change("policies.misfire", "skip", "fire_once")
    ]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"version": 3}, "version: set by the API"),
        ({"state": "suspended"}, "state: 'suspended': expected live or paused"),
        ({"state": None}, "state: None: expected live or paused"),
        ({"trigger_id": "x"}, "trigger_id: set by the API"),
        ({"recurrence": {"kind": "cron"}, "target": {"kind": "webhook"}, "colour": 1}, "colour"),
        ({"recurrence": {"kind": "weekly"}, "target": {"kind": "webhook"}}, "recurrence.kind"),
        ({"target": {"kind": "webhook"}}, "recurrence: required field missing"),
    ],
)
def test_normalize_refuses_what_the_api_fills_and_bad_fields(
    document: dict[str, Any], message: str
) -> None:
    with pytest.raises(DocumentError, match=message):
        normalize(document)


def test_a_document_state_is_planned_against_the_run_state() -> None:
    """``state`` in a document is compared with the stored run state; absent, the stored state is
    kept (nothing planned, and the amendment carries no state)."""
    document = normalize(_document())
    assert "state" not in document
    assert normalize({**_document(), "state": "paused"}) == {**document, "state": "paused"}
    paused = {"nightly": Current(document, 3, "paused")}
    assert plan({"nightly": document}, paused, prune=False) == Plan()
    assert plan({"nightly": {**document, "state": "paused"}}, paused, prune=False) == Plan()
    resume = plan({"nightly": {**document, "state": "live"}}, paused, prune=False)
    assert [(s.action, s.version, s.changes) for s in resume.steps] == [
        ("change", 3, (Change("state", "paused", "live"),))
    ]
    assert resume.lines()[:2] == ["~ change nightly (version 3)", "    state: paused -> live"]
    edited = {**document, "description": "x"}
    [step] = plan({"nightly": edited}, paused, prune=False).steps
    assert step.changes == (Change("description", None, "x"),) and "state" not in step.document


def test_a_binary_payload_stays_base64() -> None:
    doc = {**_document(), "payload": {"base64": "/w=="}}
    assert normalize(doc)["payload"] == {"base64": "/w=="}
    assert normalize({**_document(), "payload": "hi"})["payload"] == "hi"


# --- export: compact documents that read back as they were --------------------------------

tricky = st.sampled_from(
    ["yes", "on", "null", "~", "* * * * *", "0x10", "1e3", "2026-01-01T00:00:00Z", "a: b", "", "-"]
)
texts = st.one_of(tricky, st.text(max_size=8))
recurrences = st.one_of(
    st.builds(lambda e, z: {"kind": "cron", "expr": e, "zone": z}, tricky, st.just("UTC")),
    st.builds(lambda n: {"kind": "every", "interval_s": n}, st.integers(60, 10**6)),
    st.builds(
        lambda s: {"kind": "at", "instants": [f"2027-01-0{s}T00:00:00+01:00"]}, st.integers(1, 9)
    ),
)
targets = st.one_of(
    st.builds(
        lambda u: {"kind": "webhook", "url": f"https://h.example/{u}"}, st.text("ab", max_size=3)
    ),
    st.just({"kind": "event", "topic": "events.acme"}),
)
policies = st.fixed_dictionaries(
    {},
    optional={
        "misfire": st.sampled_from(["skip", "fire_once", "fire_all"]),
        "jitter_s": st.integers(0, 600),
        "retry": st.fixed_dictionaries(
            {}, optional={"base_s": st.floats(0, 10), "max_attempts": st.integers(1, 9)}
        ),
    },
)
trigger_documents = st.fixed_dictionaries(
    {"recurrence": recurrences, "target": targets},
    optional={
        "policies": policies,
        "labels": st.dictionaries(st.text("abc", min_size=1, max_size=3), texts, max_size=3),
        "description": st.one_of(st.none(), texts),
        "payload": texts,
    },
)


@settings(deadline=None)  # file I/O and the schema walk: timing varies on a shared CI box
@given(st.lists(trigger_documents, min_size=1, max_size=3))
def test_exported_documents_read_back_to_the_same_full_form(
    tmp_path_factory: pytest.TempPathFactory, docs: list[dict[str, Any]]
) -> None:
    full = {f"t{i}": normalize(d) for i, d in enumerate(docs)}
    path = tmp_path_factory.mktemp("export") / "all.yaml"
    path.write_text(to_yaml({"id": t, **compact(d)} for t, d in full.items()))
    read = read_documents(str(path))
    assert {t: normalize(d) for t, (_, d) in read.items()} == full
    for d in full.values():
        assert normalize(compact(d)) == d
        assert set(compact(d)) <= set(d)
