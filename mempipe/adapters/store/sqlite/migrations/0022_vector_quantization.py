"""Each collection's declared vector-index quantization: changeable, unlike the write-once
declarations, so kept apart from them."""

from __future__ import annotations

from typing import Any


def apply(conn: Any) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS vector_index_settings ("
        "collection TEXT PRIMARY KEY, "
        "quantization TEXT NOT NULL CHECK (quantization IN ('none', 'scalar', 'binary')), "
        "declared_at TEXT NOT NULL)"
    )
