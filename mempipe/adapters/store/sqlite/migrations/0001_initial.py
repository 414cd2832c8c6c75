"""Turns, snapshots, long-term memory collections, failures and runs."""

from __future__ import annotations

from typing import Any

_COMMON_MEMORY_COLUMNS = """
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    user_id TEXT,
    agent_id TEXT,
    session_id TEXT,
    visibility TEXT NOT NULL CHECK (visibility IN ('private', 'org')),
    text TEXT NOT NULL,
    embedding_model_id TEXT,
    has_embedding INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'superseded')),
    version INTEGER NOT NULL DEFAULT 1,
    supersedes_id TEXT,
    reinforcement_count INTEGER NOT NULL DEFAULT 0,
    evidence TEXT NOT NULL DEFAULT '[]',
    metadata TEXT,
    source TEXT NOT NULL DEFAULT 'extraction',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
"""


MEMORY_TABLES: dict[str, str] = {
    "semantic": "label TEXT",
    "episodic": "participants TEXT NOT NULL DEFAULT '[]', occurred_at TEXT",
    "procedural": "name TEXT NOT NULL, steps TEXT NOT NULL DEFAULT '[]', when_to_use TEXT",
    "taxonomic": "term TEXT NOT NULL, definition TEXT NOT NULL, domain TEXT",
    "custom": "type_name TEXT NOT NULL, tags TEXT NOT NULL DEFAULT '{}'",
}


TURNS = """
CREATE TABLE IF NOT EXISTS turns (
    id INTEGER PRIMARY KEY,
    org_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    user_id TEXT,
    agent_id TEXT,
    session_id TEXT NOT NULL,
    turn_seq INTEGER NOT NULL CHECK (turn_seq >= 0),
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'system')),
    content TEXT NOT NULL,
    created_at TEXT,
    message_id TEXT,
    name TEXT,
    model TEXT,
    tool_calls TEXT,
    tool_call_id TEXT,
    metadata TEXT,
    source_path TEXT NOT NULL,
    source_line INTEGER,
    source_index INTEGER,
    source_message_index INTEGER,
    run_id TEXT,
    snapshot_id TEXT,
    UNIQUE (org_id, project_id, session_id, turn_seq)
);
CREATE INDEX IF NOT EXISTS turns_unpromoted
    ON turns (org_id, project_id, session_id, turn_seq) WHERE snapshot_id IS NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS turns_fts USING fts5(
    content, content='turns', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
);
"""


SNAPSHOTS = """
CREATE TABLE IF NOT EXISTS snapshots (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    user_id TEXT,
    agent_id TEXT,
    session_id TEXT NOT NULL,
    first_turn_seq INTEGER NOT NULL,
    last_turn_seq INTEGER NOT NULL CHECK (last_turn_seq >= first_turn_seq),
    turn_count INTEGER NOT NULL CHECK (turn_count >= 1),
    started_at TEXT,
    ended_at TEXT,
    cut_reason TEXT NOT NULL,
    summary TEXT NOT NULL,
    run_id TEXT,
    created_at TEXT NOT NULL,
    UNIQUE (org_id, project_id, session_id, first_turn_seq)
);
CREATE TABLE IF NOT EXISTS snapshot_extractions (
    snapshot_id TEXT NOT NULL REFERENCES snapshots (id),
    handler TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'done', 'failed_retryable', 'failed_content')),
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (snapshot_id, handler)
);
CREATE INDEX IF NOT EXISTS snapshot_extractions_status ON snapshot_extractions (handler, status);
"""


FAILURES_AND_RUNS = """
CREATE TABLE IF NOT EXISTS failures (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    step TEXT NOT NULL,
    failure_class TEXT NOT NULL CHECK (failure_class IN ('environmental', 'content')),
    error_type TEXT NOT NULL,
    error TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    org_id TEXT,
    project_id TEXT,
    snapshot_id TEXT,
    handler TEXT,
    memory_id TEXT,
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS failures_run ON failures (run_id);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    flow TEXT NOT NULL,
    parameters TEXT NOT NULL DEFAULT '{}',
    status TEXT NOT NULL,
    counts TEXT NOT NULL DEFAULT '{}',
    checkpoints TEXT NOT NULL DEFAULT '{}',
    error TEXT,
    started_at TEXT NOT NULL,
    finished_at TEXT
);
"""


def memory_table_ddl(memory_type: str, extra_columns: str) -> str:
    table = f"memories_{memory_type}"
    return f"""
CREATE TABLE IF NOT EXISTS {table} ({_COMMON_MEMORY_COLUMNS}, {extra_columns});
CREATE INDEX IF NOT EXISTS {table}_identity
    ON {table} (org_id, project_id, user_id, agent_id, visibility, status);
CREATE VIRTUAL TABLE IF NOT EXISTS {table}_fts USING fts5(
    text, content='{table}', content_rowid='rowid', tokenize='unicode61 remove_diacritics 2'
);
"""


def apply(conn: Any) -> None:
    conn.execute(TURNS)
    conn.execute(SNAPSHOTS)
    conn.execute(FAILURES_AND_RUNS)
    for memory_type, columns in MEMORY_TABLES.items():
        conn.execute(memory_table_ddl(memory_type, columns))
