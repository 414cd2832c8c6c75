"""Extraction states record which run claimed them and until when, so that two replays of one
store never run the same extraction at once."""

from __future__ import annotations

from typing import Any


def apply(conn: Any) -> None:
    columns = {row[1] for row in conn.execute("PRAGMA table_info(snapshot_extractions)")}
    if "claimed_by" not in columns:
        conn.execute("ALTER TABLE snapshot_extractions ADD COLUMN claimed_by TEXT")
        conn.execute("ALTER TABLE snapshot_extractions ADD COLUMN claimed_until TEXT")
