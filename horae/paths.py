"""Default per-user directories of Horae, after the XDG base directory specification.

Pure functions of the process environment (``XDG_STATE_HOME``, ``XDG_CACHE_HOME``, ``HOME``);
they never read ``HORAE_*`` variables (``horae.settings`` does, and uses these as defaults).
Nothing is created here.
"""

from __future__ import annotations

import os
from pathlib import Path


def _xdg(variable: str, fallback: str) -> Path:
    value = os.environ.get(variable, "")
    # The specification: a relative path in an XDG variable is invalid and must be ignored.
    if value and Path(value).is_absolute():
        return Path(value) / "horae"
    return Path.home() / fallback / "horae"


def default_state_dir() -> Path:
    """Where the local stack keeps its data (Kafka logs, the PostgreSQL cluster, pid files):
    ``$XDG_STATE_HOME/horae``, else ``~/.local/state/horae``."""
    return _xdg("XDG_STATE_HOME", ".local/state")


def default_cache_dir() -> Path:
    """Where downloaded artefacts that can be fetched again are kept (the local stack's Kafka
    jars, one folder per Kafka version): ``$XDG_CACHE_HOME/horae``, else ``~/.cache/horae``."""
    return _xdg("XDG_CACHE_HOME", ".cache")
