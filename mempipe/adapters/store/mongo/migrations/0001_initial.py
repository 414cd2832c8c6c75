"""Turns, snapshots, long-term memory collections, failures and runs."""

from __future__ import annotations

from typing import Any

MEMORY_COLLECTIONS = ("semantic", "episodic", "procedural", "taxonomic", "custom")
SCOPE = ("org_id", "project_id", "user_id", "agent_id", "visibility")


def apply(store: Any) -> None:
    """The unique turn key, paging and identity indexes; a memory's own id unique."""
    db = store.db
    key = [("org_id", 1), ("project_id", 1), ("session_id", 1)]
    db["turns"].create_index([*key, ("turn_seq", 1)], unique=True, name="turn_key")
    db["turns"].create_index([("snapshot_id", 1), *key, ("turn_seq", 1)], name="turns_unpromoted")
    db["snapshots"].create_index([*key, ("first_turn_seq", 1)], unique=True, name="snapshot_key")
    db["snapshots"].create_index([("order_at", 1), ("session_id", 1)], name="snapshots_order")
    db["failures"].create_index([("run_id", 1)], name="failures_run")
    for memory_type in MEMORY_COLLECTIONS:
        db[memory_type].create_index([("id", 1)], unique=True, name="memory_id")
        db[memory_type].create_index([(f, 1) for f in (*SCOPE, "status")], name="identity")
