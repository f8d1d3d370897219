"""Disaster recovery: two local regions (:mod:`~horae.dr.regions`), MirrorMaker 2 from the region
that writes to the standby (:mod:`~horae.dr.mirror`), and the promotion of the standby with its
status (:mod:`~horae.dr.promote`). The runbook is ``docs/dr.md``; ``horae dr`` is the CLI.

One region writes; the other holds no leases and runs no planner until it is promoted. Across
regions delivery degrades to at-least-once with the same fire key (the design's DR decision).
"""

from __future__ import annotations

from horae.devstack import StackError


class DrError(StackError):
    """A refusal or failure of a DR action with an actionable message."""
