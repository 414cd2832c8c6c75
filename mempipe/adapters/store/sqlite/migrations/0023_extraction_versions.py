"""An extraction's state and each audit row record what the extraction ran with: the extractor
(whose name carries its model) and its prompt's version, so that a prompt change can be told
apart from what it made stale."""

from __future__ import annotations

from typing import Any

ADDED = {
    "snapshot_extractions": ("extractor", "prompt_version"),
    "audit": ("prompt_version",),
}


def apply(conn: Any) -> None:
    for table, columns in ADDED.items():
        present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        for column in columns:
            if column not in present:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")
