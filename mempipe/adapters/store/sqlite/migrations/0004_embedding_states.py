"""The embedding registry records each (collection, model)'s state: serving, building (being
filled by a re-embed), previous (kept after a switch until finalize or rollback)."""

from __future__ import annotations

from typing import Any


def apply(conn: Any) -> None:
    columns = {row[1] for row in conn.execute("PRAGMA table_info(embedding_registry)").fetchall()}
    if "state" not in columns:
        conn.execute(
            "ALTER TABLE embedding_registry ADD COLUMN state TEXT NOT NULL DEFAULT 'building'"
        )
        conn.execute("UPDATE embedding_registry SET state = 'serving' WHERE active = 1")
        conn.execute("ALTER TABLE embedding_registry DROP COLUMN active")
