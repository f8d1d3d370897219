"""Failpoints: named places where a process can be made to die, for crash tests.

:func:`arm` with ``"before_commit=0.05,after_commit=0.05"`` (the CLI passes the ``failpoints``
setting, ``HORAE_FAILPOINTS``) makes :func:`failpoint` SIGKILL the process itself with the given
probability at each named point (a point without ``=p`` always dies). Unarmed (the default, and
always in production), every failpoint is a no-op costing one dict lookup.
"""

from __future__ import annotations

import os
import random
import signal

_POINTS: dict[str, float] = {}


def arm(spec: str) -> None:
    """Replace the armed failpoints by those of ``spec`` (``name=probability,...``; empty: none)."""
    points = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, p = item.partition("=")
        points[name.strip()] = float(p or "1")
    _POINTS.clear()
    _POINTS.update(points)


def armed() -> dict[str, float]:
    """The armed failpoints and their probabilities."""
    return dict(_POINTS)


def failpoint(name: str) -> None:
    """Die here (SIGKILL, no cleanup) with the configured probability of ``name``."""
    p = _POINTS.get(name)
    if p is not None and random.random() < p:
        os.kill(os.getpid(), signal.SIGKILL)
