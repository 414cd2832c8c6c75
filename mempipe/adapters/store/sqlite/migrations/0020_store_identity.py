"""The store's own id, made once: the files it writes carry it (the audit's Parquet metadata),
so that an erase reaches the files of this store and no other's, even in a folder two stores
share or a copy of one store made from another."""

from __future__ import annotations

import uuid
from typing import Any


def apply(conn: Any) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS store_identity (id TEXT NOT NULL)")
    conn.execute(
        "INSERT INTO store_identity (id) SELECT ? WHERE NOT EXISTS (SELECT 1 FROM store_identity)",
        (uuid.uuid4().hex,),
    )
