"""Build a :class:`SqliteStore` from a URL, failing early with a clear message."""

from __future__ import annotations

from mempipe.adapters.store.sqlite.client import SqliteStore
from mempipe.adapters.store.sqlite.configuration import config_from_url
from mempipe.errors import StoreError


def open_sqlite_store(url: str) -> SqliteStore:
    config = config_from_url(url)
    parent = config.path.parent
    if not parent.is_dir():
        raise StoreError(f"{url!r}: directory {str(parent)!r} does not exist")
    if config.path.exists() and not config.path.is_file():
        raise StoreError(f"{url!r}: {str(config.path)!r} is not a file")
    return SqliteStore(config)
