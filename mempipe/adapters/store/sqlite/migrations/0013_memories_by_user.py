"""Memories are found by user: a user-scoped search reads the user's rowid span and count from
an index instead of scanning the collection."""

from __future__ import annotations

from typing import Any

COLLECTIONS = ("semantic", "episodic", "procedural", "taxonomic", "custom")


def apply(conn: Any) -> None:
    for collection in COLLECTIONS:
        conn.execute(
            f"CREATE INDEX IF NOT EXISTS memories_{collection}_by_user "
            f"ON memories_{collection} (user_id)"
        )
