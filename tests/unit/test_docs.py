"""Every relative link in the repository's Markdown resolves to a file or folder inside the
repository: a person who clones it must be able to follow each one. Links to the web
(``http(s)://``), ``mailto:`` and in-page anchors are not checked; a link's ``#anchor`` is
stripped before its path is resolved."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIPPED_DIRS = frozenset({".venv", ".git", ".horae", "node_modules"})

# [text](target) and ![alt](target), an optional "title" after the target; <target> allowed.
_INLINE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# [label]: target   (reference definitions)
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.MULTILINE)
_FENCE = re.compile(r"^(\s*)(```|~~~).*?^\1\2[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_EXTERNAL = ("http://", "https://", "mailto:")


def markdown_files(root: Path) -> list[Path]:
    """Every ``*.md`` under ``root``, outside the skipped folders (never entered: a running
    broker's data directory changes under a walk)."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        found += [Path(folder, f) for f in files if f.endswith(".md")]
    return sorted(found)


def link_targets(text: str) -> list[str]:
    """The link targets of a Markdown text, code blocks and code spans left out."""
    prose = _CODE_SPAN.sub("", _FENCE.sub("", text))
    return _INLINE.findall(prose) + _REFERENCE.findall(prose)


def broken_links(path: Path, root: Path) -> list[str]:
    """The relative links of ``path`` that do not resolve to an existing path inside ``root``."""
    broken = []
    for target in link_targets(path.read_text(encoding="utf-8")):
        if target.lower().startswith(_EXTERNAL) or target.startswith("#"):
            continue
        relative = target.split("#", 1)[0].split("?", 1)[0]
        base = root if relative.startswith("/") else path.parent
        resolved = (base / relative.lstrip("/")).resolve()
        if not resolved.is_relative_to(root.resolve()):
            broken.append(f"{target} (outside the repository)")
        elif not resolved.exists():
            broken.append(f"{target} (missing)")
    return broken


def test_every_relative_link_resolves_inside_the_repository() -> None:
    files = markdown_files(ROOT)
    assert ROOT / "README.md" in files
    problems = {
        str(path.relative_to(ROOT)): broken
        for path in files
        if (broken := broken_links(path, ROOT))
    }
    assert problems == {}


@pytest.mark.parametrize(
    ("link", "ok"),
    [
        ("docs/a.md", True),
        ("docs/a.md#some-anchor", True),
        ("docs/", True),
        ("#only-an-anchor", True),
        ("https://example.com/x.md", True),
        ("mailto:ops@example.com", True),
        ("docs/missing.md", False),
        ("../elsewhere/DESIGN.md", False),  # outside the repository
        ("docs/../../outside.md", False),
    ],
)
def test_the_checker_tells_good_from_broken_links(tmp_path: Path, link: str, ok: bool) -> None:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("# a\n", encoding="utf-8")
    (tmp_path / "outside.md").write_text("# outside\n", encoding="utf-8")
    page = root / "README.md"
    page.write_text(f"See [it]({link}).\n\n`[code](nowhere.md)`\n", encoding="utf-8")
    assert (broken_links(page, root) == []) is ok


def test_skipped_folders_and_code_blocks_are_not_read(tmp_path: Path) -> None:
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "x.md").write_text("[x](gone.md)\n", encoding="utf-8")
    page = tmp_path / "README.md"
    page.write_text("```\n[x](gone.md)\n```\n[ref]: ../up.md\n", encoding="utf-8")
    assert markdown_files(tmp_path) == [page]
    assert broken_links(page, tmp_path) == ["../up.md (outside the repository)"]
