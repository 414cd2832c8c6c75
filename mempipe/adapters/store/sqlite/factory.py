"""Build a :class:`SqliteStore` from a URL, failing early with a clear message."""

from __future__ import annotations

import os

from mempipe.adapters.store.sqlite.client import SqliteStore
from mempipe.adapters.store.sqlite.configuration import config_from_url
from mempipe.errors import CREATE_HINT, StoreError


def open_sqlite_store(url: str, *, existing: bool = False) -> SqliteStore:
    """``existing``: the file must be there already (only the commands that bring data in, and
    ``mempipe init``, create one)."""
    config = config_from_url(url)
    parent = config.path.parent
    if existing and not config.path.exists():
        raise StoreError(
            f"{url!r}: no store at {str(config.path)!r}; nothing was created ({CREATE_HINT})"
        )
    if not parent.is_dir():
        raise StoreError(
            f"{url!r}: directory {str(parent)!r} does not exist (`mempipe init` makes it, "
            "with an empty store)"
        )
    if config.path.exists() and not config.path.is_file():
        raise StoreError(f"{url!r}: {str(config.path)!r} is not a file")
    if not os.access(parent, os.W_OK) and not existing:
        raise StoreError(f"{url!r}: directory {str(parent)!r} is not writable")
    return SqliteStore(config.model_copy(update={"existing": existing}))
