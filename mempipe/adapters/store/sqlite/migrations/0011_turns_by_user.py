"""Turns are found by user: a user-scoped search reads the user's id span and count from an
index instead of scanning every turn."""

from __future__ import annotations

from typing import Any


def apply(conn: Any) -> None:
    conn.execute("CREATE INDEX IF NOT EXISTS turns_by_user ON turns (user_id)")
