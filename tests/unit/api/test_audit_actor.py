"""The acting subject reaches the audit: a platform-signed command (as the API sends it) is
audited with the platform key as principal and its ``requested_by`` in the detail."""

from __future__ import annotations

from dataclasses import replace

from horae.contracts import events as ev
from horae.contracts.topics import Topic
from tests.unit.planner.builders import command, definition
from tests.unit.planner.test_commands import Rig, as_platform

ACTOR = "alice (api; roles author)"


def test_a_command_audit_names_the_actor() -> None:
    rig = Rig()
    rig.put(definition("daily", "0 0 1 1 *"))
    rig.step()
    run = command("daily", ev.CommandKind.MANUAL_RUN, rig.clock.now(), ev.Role.AUTHOR)
    rig.send(as_platform(replace(run, requested_by=ACTOR)))
    rig.step()
    [entry] = rig.read(Topic.AUDIT, ev.AuditEntry)
    assert entry.action == "manual_run.request" and entry.allowed
    assert entry.detail["requested_by"] == ACTOR and entry.principal != ACTOR
