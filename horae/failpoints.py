"""Failpoints: named places where a process can be made to die, for crash tests.

``HORAE_FAILPOINTS="before_commit=0.05,after_commit=0.05"`` makes :func:`failpoint` SIGKILL the
process itself with the given probability at each named point. Unset (the default, and always in
production), every failpoint is a no-op costing one dict lookup.
"""

from __future__ import annotations

import os
import random
import signal

_POINTS: dict[str, float] = {}
for _item in filter(None, os.environ.get("HORAE_FAILPOINTS", "").split(",")):
    _name, _, _p = _item.partition("=")
    _POINTS[_name.strip()] = float(_p or "1")


def failpoint(name: str) -> None:
    """Die here (SIGKILL, no cleanup) with the configured probability of ``name``."""
    p = _POINTS.get(name)
    if p is not None and random.random() < p:
        os.kill(os.getpid(), signal.SIGKILL)
