"""MongoDB only: Atlas Search text indexes over every collection, and the ``supersedes_id``
index crash recovery reads (SQLite's FTS5 tables came with 0001)."""

from __future__ import annotations

from typing import Any

MEMORY_COLLECTIONS = ("semantic", "episodic", "procedural", "taxonomic", "custom")


def apply(store: Any) -> None:
    for memory_type in MEMORY_COLLECTIONS:
        store.db[memory_type].create_index([("supersedes_id", 1)], name="supersedes")
    store.create_text_indexes()
