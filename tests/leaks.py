"""Search everywhere a secret or an erased text could have gone: every table and column of a
SQLite database (Prefect's, a store's), every file under a folder (its raw bytes), and any text
(stdout, stderr, log lines). Each needle is looked for in the forms it takes when written:
as is, JSON-escaped, HTML-escaped, percent-encoded and lower-cased (a text index's terms)."""

from __future__ import annotations

import html
import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote


def forms(needle: str) -> set[bytes]:
    written = {
        needle,
        json.dumps(needle)[1:-1],
        json.dumps(needle, ensure_ascii=False)[1:-1],
        html.escape(needle),
        needle.replace("'", "\\u0027"),
        quote(needle, safe=""),
        needle.lower(),
    }
    return {form.encode() for form in written if form}


def hits_in_text(where: str, text: str | bytes, needles: Iterable[str]) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return [f"{where}: {needle!r}" for needle in needles if any(f in data for f in forms(needle))]


def hits_in_files(root: Path, needles: Iterable[str], skip: Iterable[Path] = ()) -> list[str]:
    """Every file under ``root`` (databases included, as raw bytes: what a disk holds)."""
    skipped = {p.resolve() for p in skip}
    needles = list(needles)
    found: list[str] = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not any(path.resolve().is_relative_to(s) for s in skipped):
            found += hits_in_text(str(path.relative_to(root)), path.read_bytes(), needles)
    return found


def hits_in_database(db: Path, needles: Iterable[str]) -> list[str]:
    """Every row of every table, each column read as text (BLOBs as bytes)."""
    needles = list(needles)
    found: list[str] = []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE '%VIRTUAL%'"
            )
        ]
        for table in tables:
            try:
                rows = conn.execute(f'SELECT * FROM "{table}"').fetchall()
            except sqlite3.OperationalError:  # a shadow table of an extension's module
                continue
            for row in rows:
                for value in row:
                    if value is None:
                        continue
                    data = value if isinstance(value, bytes) else str(value).encode()
                    found += hits_in_text(f"{db.name}:{table}", data, needles)
    finally:
        conn.close()
    return sorted(set(found))
