"""The files mempipe wrote that hold users' text (audit folders, rejects files, bundles), so
that an erase can reach each one, wherever it was written."""

from __future__ import annotations

from typing import Any


def apply(store: Any) -> None:
    store.db["written_files"].create_index([("kind", 1)], name="written_files_kind")
