"""Forgetting by policy: the audit's action may be ``FORGET``, with the rule that applied
(SQLite cannot change a CHECK in place, so the table is made again, its rows, indexes and
erase-fence trigger kept), and ``forgotten_evidence`` names each (snapshot, handler) whose
memories were forgotten, ``*`` for a snapshot whose turns all were: the work queue never hands
it out again, so no replay re-creates what was forgotten."""

from __future__ import annotations

import re
from typing import Any


def apply(conn: Any) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS forgotten_evidence (snapshot_id TEXT NOT NULL, "
        "handler TEXT NOT NULL, forgotten_at TEXT NOT NULL, PRIMARY KEY (snapshot_id, handler))"
    )
    (ddl,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'audit'").fetchone()
    if "'FORGET'" in ddl:
        return
    attached = [
        text
        for (text,) in conn.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'audit' AND type IN "
            "('index', 'trigger') AND sql IS NOT NULL"
        )
    ]
    columns = [row[1] for row in conn.execute("PRAGMA table_info(audit)")]
    made = re.sub(r"^CREATE TABLE \"?audit\"?", "CREATE TABLE audit_made", ddl)
    made = made.replace("'REINFORCE')", "'REINFORCE', 'FORGET')")
    conn.execute(made)
    listed = ", ".join(columns)
    conn.execute(f"INSERT INTO audit_made ({listed}) SELECT {listed} FROM audit")
    conn.execute("DROP TABLE audit")
    conn.execute("ALTER TABLE audit_made RENAME TO audit")
    conn.execute("ALTER TABLE audit ADD COLUMN rule TEXT")
    for text in attached:
        conn.execute(text)
