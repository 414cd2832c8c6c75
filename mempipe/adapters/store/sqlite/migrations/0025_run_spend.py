"""What a run's provider requests spent, per day, kind of request, model and memory type: the
requests and the tokens the provider reported, added to as each task's counts are written."""

from __future__ import annotations

from typing import Any


def apply(conn: Any) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS run_spend ("
        "run_id TEXT NOT NULL, day TEXT NOT NULL, kind TEXT NOT NULL, model TEXT NOT NULL, "
        "memory_type TEXT NOT NULL DEFAULT '', via TEXT NOT NULL DEFAULT 'live', "
        "requests INTEGER NOT NULL DEFAULT 0, input_tokens INTEGER NOT NULL DEFAULT 0, "
        "output_tokens INTEGER NOT NULL DEFAULT 0, unreported INTEGER NOT NULL DEFAULT 0, "
        "PRIMARY KEY (run_id, day, kind, model, memory_type, via))"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS run_spend_day ON run_spend (day)")
