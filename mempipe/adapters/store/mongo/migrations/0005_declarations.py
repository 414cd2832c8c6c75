"""What a project declared, write-once: metadata partition keys and custom memory types."""

from __future__ import annotations

from typing import Any


def apply(store: Any) -> None:
    store.db["declarations"].create_index([("kind", 1), ("name", 1)], name="declarations_kind")
