"""Audit rows say when an extraction was reconciled as history: its snapshot is older than the
current fact it restates differently, so it is kept as a superseded version and the current
fact stays."""

from __future__ import annotations

from typing import Any


def apply(conn: Any) -> None:
    columns = {row[1] for row in conn.execute("PRAGMA table_info(audit)")}
    if "as_history" not in columns:
        conn.execute("ALTER TABLE audit ADD COLUMN as_history INTEGER NOT NULL DEFAULT 0")
