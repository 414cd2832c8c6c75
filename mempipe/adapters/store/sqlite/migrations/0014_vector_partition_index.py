"""A user's vectors are found through an index: sqlite-vec looks a partition's chunks up in its
chunk table by the partition value, and that table has no index of its own, so every
user-scoped KNN read all of the table's chunk rows."""

from __future__ import annotations

from typing import Any


def apply(conn: Any) -> None:
    tables = [
        row[0] for row in conn.execute("SELECT vector_table FROM embedding_registry").fetchall()
    ]
    for table in tables:
        chunks = conn.execute(f"PRAGMA table_info({table}_chunks)").fetchall()
        if any(column[1] == "partition00" for column in chunks):
            conn.execute(
                f"CREATE INDEX IF NOT EXISTS {table}_by_partition ON {table}_chunks (partition00)"
            )
