"""The documentation a test reads: the README and the pages of the docs site, by name, so that
a test pins what a reader sees wherever it is written."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def page(name: str) -> str:
    """The text of ``README.md`` or of a page under ``docs/`` (``"jobs/erase.md"``)."""
    return (README if name == "README.md" else DOCS / name).read_text()


def pages() -> list[Path]:
    """Every page a reader can open: the README first, then the site's."""
    return [README, *sorted(DOCS.rglob("*.md"))]
