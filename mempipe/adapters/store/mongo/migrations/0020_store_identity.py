"""The store's own id, made once: the files it writes carry it (the audit's Parquet metadata),
so that an erase reaches the files of this store and no other's, even in a folder two stores
share or a copy of one store made from another."""

from __future__ import annotations

import uuid
from typing import Any


def apply(store: Any) -> None:
    store.db["store_identity"].update_one(
        {"_id": "store"}, {"$setOnInsert": {"id": uuid.uuid4().hex}}, upsert=True
    )
