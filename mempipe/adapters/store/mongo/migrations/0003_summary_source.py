"""Snapshots record who wrote their summary: the deterministic rules, or an LLM extractor."""

from __future__ import annotations

from typing import Any


def apply(store: Any) -> None:
    store.db["snapshots"].update_many(
        {"summary_source": {"$exists": False}}, {"$set": {"summary_source": "rules"}}
    )
