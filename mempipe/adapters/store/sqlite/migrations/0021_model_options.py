"""The embedding registry records each model's options (its sides' prefixes and request fields,
its dimension parameter), so that a store moved to a two-sided provider model is searched as it
was embedded by every later command, whatever configuration that command reads."""

from __future__ import annotations

from typing import Any


def apply(conn: Any) -> None:
    columns = {row[1] for row in conn.execute("PRAGMA table_info(embedding_registry)")}
    if "options" not in columns:
        conn.execute("ALTER TABLE embedding_registry ADD COLUMN options TEXT")
