"""An erase fences its owner: ``erased_owners`` records each erase, and on SQLite a trigger on
every table that holds an owner's text drops any row of that owner written by work that began
before the erase committed, in the writer's own transaction, whatever process it runs in.

``mempipe_writer_epoch()`` is a function each mempipe connection defines (when the writing work
began); a connection without it cannot write an erased owner's rows at all. ``RAISE(IGNORE)``
skips that row only, so a batch of many owners goes on without it."""

from __future__ import annotations

from typing import Any

OWNED_TABLES = (
    "turns",
    "snapshots",
    "audit",
    "memories_semantic",
    "memories_episodic",
    "memories_procedural",
    "memories_taxonomic",
    "memories_custom",
)


FENCED = """
    EXISTS (
        SELECT 1 FROM erased_owners AS e
        WHERE e.user_id = NEW.user_id
          AND (e.org_id IS NULL OR e.org_id = NEW.org_id)
          AND (e.project_id IS NULL OR e.project_id = NEW.project_id)
          AND e.erased_at > mempipe_writer_epoch()
    )
"""


def apply(conn: Any) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS erased_owners ("
        "id INTEGER PRIMARY KEY, user_id TEXT NOT NULL, org_id TEXT, project_id TEXT, "
        "erased_at TEXT NOT NULL)"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS erased_owners_user ON erased_owners (user_id)")
    for table in OWNED_TABLES:
        private = "NEW.visibility = 'private' AND " if table.startswith("memories_") else ""
        conn.execute(
            f"CREATE TRIGGER IF NOT EXISTS {table}_erase_fence BEFORE INSERT ON {table} "
            f"WHEN {private}{FENCED} BEGIN SELECT RAISE(IGNORE); END"
        )
    conn.execute(
        "CREATE TRIGGER IF NOT EXISTS snapshot_extractions_erase_fence "
        "BEFORE INSERT ON snapshot_extractions "
        "WHEN NOT EXISTS (SELECT 1 FROM snapshots WHERE id = NEW.snapshot_id) "
        "BEGIN SELECT RAISE(IGNORE); END"
    )
