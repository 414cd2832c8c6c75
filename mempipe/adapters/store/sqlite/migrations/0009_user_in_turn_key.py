"""Turn and snapshot identity includes the user: two users' archives may reuse the same session
ids ("1", "support-118") and must never be merged. The keys become (org, project, user,
session, seq), a missing user counting as one user of its own."""

from __future__ import annotations

import re
from typing import Any

OLD_KEYS = {
    "turns": re.compile(r",\s*UNIQUE \(org_id, project_id, session_id, turn_seq\)"),
    "snapshots": re.compile(r",\s*UNIQUE \(org_id, project_id, session_id, first_turn_seq\)"),
}


INDEXES = """
CREATE UNIQUE INDEX IF NOT EXISTS turn_key
    ON turns (org_id, project_id, coalesce(user_id, ''), session_id, turn_seq);
CREATE INDEX IF NOT EXISTS turns_unpromoted
    ON turns (org_id, project_id, coalesce(user_id, ''), session_id, turn_seq)
    WHERE snapshot_id IS NULL;
CREATE UNIQUE INDEX IF NOT EXISTS snapshot_key
    ON snapshots (org_id, project_id, coalesce(user_id, ''), session_id, first_turn_seq);
"""


def apply(conn: Any) -> None:
    """SQLite cannot drop a table's constraint: each table is rebuilt without its old key (rows
    and rowids kept, so the text index and vector tables still point at them), then the new
    keys are unique indexes (the runner turns foreign keys off around it and checks them)."""
    for table, old_key in OLD_KEYS.items():
        (ddl,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
        if not old_key.search(ddl):
            continue
        rebuilt = old_key.sub("", ddl).replace(
            f"CREATE TABLE {table}", f"CREATE TABLE {table}__new", 1
        )
        rebuilt = rebuilt.replace(
            f"CREATE TABLE IF NOT EXISTS {table}", f"CREATE TABLE {table}__new", 1
        )
        conn.execute(rebuilt)
        conn.execute(f"INSERT INTO {table}__new SELECT * FROM {table}")
        conn.execute(f"DROP TABLE {table}")
        conn.execute(f"ALTER TABLE {table}__new RENAME TO {table}")
    conn.execute(INDEXES)
