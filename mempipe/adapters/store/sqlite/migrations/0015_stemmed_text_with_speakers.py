"""Text indexes stem words (Porter) and a turn's index holds its speaker's name: the FTS5 tables
are rebuilt from their content tables with the new tokenizer and columns."""

from __future__ import annotations

from typing import Any

TOKENIZER = "porter unicode61 remove_diacritics 2"


def apply(conn: Any) -> None:
    conn.execute("DROP TABLE IF EXISTS turns_fts")
    conn.execute(
        "CREATE VIRTUAL TABLE turns_fts USING fts5(name, content, content='turns', "
        f"content_rowid='id', tokenize='{TOKENIZER}')"
    )
    conn.execute("INSERT INTO turns_fts (turns_fts) VALUES ('rebuild')")
    memory_indexes = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB 'memories_*_fts' "
        "AND sql LIKE 'CREATE VIRTUAL TABLE%fts5%'"
    ).fetchall()
    for (index,) in memory_indexes:
        source = index.removesuffix("_fts")
        conn.execute(f"DROP TABLE {index}")
        conn.execute(
            f"CREATE VIRTUAL TABLE {index} USING fts5(text, content='{source}', "
            f"content_rowid='rowid', tokenize='{TOKENIZER}')"
        )
        conn.execute(f"INSERT INTO {index} ({index}) VALUES ('rebuild')")
