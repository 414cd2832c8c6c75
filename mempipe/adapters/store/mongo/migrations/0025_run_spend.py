"""What a run's provider requests spent: one document per run, day, kind, model, memory type
and way (live or batch), its counts added to with ``$inc``."""

from __future__ import annotations

from typing import Any


def apply(store: Any) -> None:
    store.db["run_spend"].create_index([("day", 1)])
