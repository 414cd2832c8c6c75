"""Bridges between embedding models: one per collection, a map into its serving model's space
(no text, no record's vector)."""

from __future__ import annotations

from typing import Any


def apply(conn: Any) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS embedding_bridges ("
        "collection TEXT PRIMARY KEY, serving_model TEXT NOT NULL, query_model TEXT NOT NULL, "
        "kind TEXT NOT NULL, sample INTEGER NOT NULL, pairs INTEGER NOT NULL, "
        "seed INTEGER NOT NULL, "
        "source_dims INTEGER NOT NULL, target_dims INTEGER NOT NULL, "
        "held_out_cosine REAL NOT NULL, fitted_at TEXT NOT NULL, weights BLOB NOT NULL)"
    )
