"""Each memory version records what extracted it: the extractor (whose name carries its model)
and its prompt's version."""

from __future__ import annotations

from typing import Any

TABLES = ("semantic", "episodic", "procedural", "taxonomic", "custom")
ADDED = ("extractor", "prompt_version")


def apply(conn: Any) -> None:
    for memory_type in TABLES:
        name = f"memories_{memory_type}"
        present = {row[1] for row in conn.execute(f"PRAGMA table_info({name})")}
        for column in ADDED:
            if column not in present:
                conn.execute(f"ALTER TABLE {name} ADD COLUMN {column} TEXT")
