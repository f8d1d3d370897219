"""Where the tests find the repository: computed from this file, not from the installed package."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
