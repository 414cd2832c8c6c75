"""Atlas Search indexes over every collection's text (MongoDB only: SQLite's FTS5 tables came
with 0001)."""

from __future__ import annotations

from typing import Any


def mongodb(store: Any) -> None:
    store.create_text_indexes()
