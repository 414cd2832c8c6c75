"""Extraction: the audit log, the embedding registry, and one active record per key and scope."""

from __future__ import annotations

from typing import Any

KEYED = {"semantic": "label", "procedural": "name", "taxonomic": "term"}


AUDIT = """
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    at TEXT NOT NULL,
    day TEXT NOT NULL,
    org_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    user_id TEXT,
    agent_id TEXT,
    memory_type TEXT NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('ADD', 'UPDATE', 'REINFORCE')),
    memory_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    superseded_id TEXT,
    similarity REAL,
    snapshot_id TEXT,
    extractor TEXT,
    embedding_model_id TEXT,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_day ON audit (day);
CREATE INDEX IF NOT EXISTS audit_run ON audit (run_id);
CREATE TABLE IF NOT EXISTS embedding_registry (
    collection TEXT NOT NULL,
    model_id TEXT NOT NULL,
    dimensions INTEGER NOT NULL,
    vector_table TEXT NOT NULL,
    active INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    PRIMARY KEY (collection, model_id)
);
"""


def apply(conn: Any) -> None:
    conn.execute(AUDIT)
    for memory_type, key in KEYED.items():
        # Two workers reconciling one scope cannot both ADD the same keyed fact: the second
        # insert violates this index (and reconciliation runs under BEGIN IMMEDIATE anyway).
        conn.execute(
            f"CREATE UNIQUE INDEX IF NOT EXISTS memories_{memory_type}_active_key "
            f"ON memories_{memory_type} (org_id, project_id, coalesce(user_id, ''), "
            f"coalesce(agent_id, ''), visibility, {key}) WHERE status = 'active'"
        )
