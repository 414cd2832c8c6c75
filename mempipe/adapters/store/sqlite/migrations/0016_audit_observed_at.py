"""Audit rows carry when their evidence happened (``observed_at``: the snapshot's time) beside
when they were applied; rows written before are given their snapshot's time."""

from __future__ import annotations

from typing import Any


def apply(conn: Any) -> None:
    columns = [row[1] for row in conn.execute("PRAGMA table_info(audit)").fetchall()]
    if "observed_at" not in columns:
        conn.execute("ALTER TABLE audit ADD COLUMN observed_at TEXT")
    conn.execute(
        "UPDATE audit SET observed_at = (SELECT coalesce(s.started_at, s.created_at) "
        "FROM snapshots s WHERE s.id = audit.snapshot_id) WHERE observed_at IS NULL"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS audit_observed ON audit (observed_at)")
