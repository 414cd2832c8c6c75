"""The files mempipe wrote that hold users' text (audit folders, rejects files, bundles), so
that an erase can reach each one, wherever it was written."""

from __future__ import annotations

from typing import Any


def apply(conn: Any) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS written_files (path TEXT PRIMARY KEY, kind TEXT NOT NULL, "
        "run_id TEXT, user_id TEXT, written_at TEXT NOT NULL)"
    )
