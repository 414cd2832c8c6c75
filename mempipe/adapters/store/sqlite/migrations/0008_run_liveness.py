"""Runs record where they run (host, pid) and a heartbeat; leases are named locks held by a run
(an owner's replay work, a store's re-embed) that end when the run dies."""

from __future__ import annotations

from typing import Any


def apply(conn: Any) -> None:
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    for column, kind in (
        ("host", "TEXT"),
        ("pid", "INTEGER"),
        ("machine", "TEXT"),
        ("heartbeat_at", "TEXT"),
    ):
        if column not in columns:
            conn.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS leases (name TEXT PRIMARY KEY, run_id TEXT NOT NULL, "
        "until TEXT NOT NULL, acquired_at TEXT NOT NULL)"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS leases_run ON leases (run_id)")
    conn.execute("CREATE INDEX IF NOT EXISTS runs_running ON runs (status)")
