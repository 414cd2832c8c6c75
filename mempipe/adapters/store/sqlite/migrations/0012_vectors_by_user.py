"""Vectors are stored per user (a sqlite-vec partition key on ``user_id``, chunks of 64): a
user-scoped search reads that user's vectors instead of every vector with a filter. Each
existing vector table is rebuilt in the new layout, its vectors copied as they are."""

from __future__ import annotations

import re
from typing import Any

CHUNK_SIZE = 64


def apply(conn: Any) -> None:
    tables = [
        row[0] for row in conn.execute("SELECT vector_table FROM embedding_registry").fetchall()
    ]
    for table in tables:
        found = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchall()
        if not found or re.search(r"partition\s+key", found[0][0], re.IGNORECASE):
            continue
        ddl = found[0][0]
        columns = [
            part.split()[0]
            for part in ddl[ddl.index("distance_metric=") :].split(",")[1:]
            if part.strip()
        ]
        columns = [c.rstrip(")") for c in columns]
        partitioned = re.sub(r"\buser_id text\b", "user_id text partition key", ddl)
        partitioned = partitioned.rstrip().removesuffix(")") + f", chunk_size={CHUNK_SIZE})"
        names = ", ".join(["memory_rowid", "embedding", *columns])
        conn.execute(f"CREATE TEMP TABLE mempipe_staging AS SELECT {names} FROM {table}")
        conn.execute(f"DROP TABLE {table}")
        conn.execute(partitioned)
        conn.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM mempipe_staging")
        conn.execute("DROP TABLE mempipe_staging")
