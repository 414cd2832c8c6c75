"""Provider batches: what a run submitted to a provider's Batch API, found again by a run that
follows a killed one, so that no request is submitted twice."""

from __future__ import annotations

from typing import Any


def apply(conn: Any) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS provider_batches (key TEXT PRIMARY KEY, run_id TEXT NOT NULL, "
        "job TEXT NOT NULL, scope TEXT NOT NULL, status TEXT NOT NULL, created_at TEXT NOT NULL, "
        "record TEXT NOT NULL)"
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS provider_batches_scope ON provider_batches (job, scope, status)"
    )
