"""The chaos soak's short profile (what ``horae chaos --profile short`` runs): the whole system on
a private broker and PostgreSQL of its own, under load, with processes, the broker and the
database SIGKILLed and restarted and members drained; the independent checker must find no
decision lost or doubled, every delivery keyed, and the read models equal to a rebuild."""

from __future__ import annotations

import pytest

from tests.chaos.soak.driver import render, run_soak

SEED = 20261201
#: the latest decision may follow its instant by a broker outage, a hung call's deadline
#: (``HANG_DEADLINE_S``) and a restart, not more: a member silent for minutes fails the soak
LIVENESS_S = 180.0


@pytest.mark.timeout(900)
def test_short_soak_loses_doubles_and_diverges_nothing() -> None:
    verdict, workdir = run_soak("short", None, SEED)
    print(render(verdict))
    f = verdict.figures
    assert verdict.ok, f"{verdict.problems} (logs in {workdir})"
    assert f["process_kills"] >= 3 and f["broker_kills"] >= 1 and f["db_restarts"] >= 1
    assert f["instants"] > 0 and f["webhook_decisions"] > 0 and f["event_decisions"] > 0
    assert f["decision_lateness_max_s"] <= LIVENESS_S, f"a member was silent (logs in {workdir})"
