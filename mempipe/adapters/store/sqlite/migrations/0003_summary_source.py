"""Snapshots record who wrote their summary: the deterministic rules, or an LLM extractor."""

from __future__ import annotations

from typing import Any


def apply(conn: Any) -> None:
    columns = {row[1] for row in conn.execute("PRAGMA table_info(snapshots)").fetchall()}
    if "summary_source" not in columns:
        conn.execute(
            "ALTER TABLE snapshots ADD COLUMN summary_source TEXT NOT NULL DEFAULT 'rules'"
        )
