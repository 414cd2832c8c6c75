"""What a project declared, write-once: metadata partition keys and custom memory types."""

from __future__ import annotations

from typing import Any


def apply(conn: Any) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS declarations ("
        "kind TEXT NOT NULL CHECK (kind IN ('partition_key', 'custom_type')), "
        "name TEXT NOT NULL, definition TEXT NOT NULL, declared_at TEXT NOT NULL, "
        "PRIMARY KEY (kind, name))"
    )
