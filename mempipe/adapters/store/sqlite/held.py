"""What a connection keeps from the database between reads, and when it must let it go."""

from __future__ import annotations

import apsw


def database_version(conn: apsw.Connection) -> tuple[int, int, int]:
    """Changes whenever what is held may be stale: another connection committed a write
    (``data_version``), the schema changed, or this connection wrote (``total_changes``)."""
    return (
        conn.execute("PRAGMA data_version").fetchall()[0][0],
        conn.execute("PRAGMA schema_version").fetchall()[0][0],
        conn.total_changes(),
    )


def vocabulary(conn: apsw.Connection, fts: str, kind: str, made: set[str]) -> str:
    """A temporary ``fts5vocab`` table of ``kind`` (row, instance) over the index, made once
    per connection (``made`` holds the names this connection made)."""
    name = f"mempipe_{kind}_{fts}"
    if name not in made:
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{name} USING fts5vocab(main, {fts}, {kind})"
        )
        made.add(name)
    return name
