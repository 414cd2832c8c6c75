"""One parser per archive format: a source record in, drafts (or rejects) out."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from mempipe.archives.drafts import Draft, Skipped
from mempipe.archives.json_records import JsonRecord
from mempipe.schemas.reject import Reject

RecordParser = Callable[[JsonRecord], Iterable[Draft | Reject | Skipped]]
"""Parses one record of one file; a new parser is made per file (some keep per-file state)."""


def first_present(mapping: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        value = mapping.get(key)
        if value not in (None, ""):
            return value
    return None
