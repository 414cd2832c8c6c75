"""The embedding registry records each (collection, model)'s state: serving, building (being
filled by a re-embed), previous (kept after a switch until finalize or rollback)."""

from __future__ import annotations

from typing import Any


def apply(store: Any) -> None:
    store.db["embedding_registry"].create_index(
        [("collection", 1), ("state", 1)], name="registry_state"
    )
