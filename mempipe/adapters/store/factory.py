"""Open a store from its URL; the scheme picks the backend."""

from __future__ import annotations

from urllib.parse import urlsplit

from mempipe.adapters.store.base import Store
from mempipe.credentials import connect_url, public_url
from mempipe.errors import StoreError

SUPPORTED = ("sqlite", "mongodb", "mongodb+srv")


def open_store(url: str, *, migrate: bool = True, read_only: bool = False) -> Store:
    """Open the store named by ``url``: ``sqlite:///path.db`` (a bare path means SQLite),
    ``mongodb://HOST/DB`` or ``mongodb+srv://HOST/DB``; a MongoDB URL's password may be
    ``***``, the one this process keeps for it (:func:`~mempipe.credentials.connect_url`).

    With ``migrate`` (the default) every pending migration is applied first, so a new store is
    usable on first use. ``read_only`` is for commands that only read: the store must already
    exist and be a mempipe store with every migration applied; nothing is created or changed.
    """
    scheme = urlsplit(url).scheme if "://" in url else "sqlite"
    shown = public_url(url)
    if scheme == "sqlite":
        from mempipe.adapters.store.sqlite.factory import open_sqlite_store

        store = open_sqlite_store(url, existing=read_only)
    elif scheme in ("mongodb", "mongodb+srv"):
        from mempipe.adapters.store.mongo.factory import open_mongo_store

        store = open_mongo_store(connect_url(url))
    else:
        raise StoreError(
            f"unsupported store URL scheme {scheme!r} in {shown!r}; "
            f"supported: {', '.join(SUPPORTED)}"
        )
    if read_only:
        try:
            require_migrated(store)
        except StoreError:
            store.close()
            raise
    return prepare(store, migrate=migrate and not read_only)


def require_migrated(store: Store) -> None:
    """Refuse a store that mempipe never set up, or one that needs migrations, without writing."""
    from mempipe.migrations import pending

    if not store.applied_migrations():
        raise StoreError(
            f"{store.url} is not a mempipe store (no migrations recorded); nothing was changed. "
            "Commands that write (backfill, migrate) create one."
        )
    missing = [m.id for m in pending(store)]
    if missing:
        raise StoreError(
            f"{store.url} needs migrations {', '.join(missing)}; run `mempipe migrate` first"
        )


def prepare(store: Store, *, migrate: bool = True) -> Store:
    """Apply pending migrations (unless told not to) and load the store's declarations."""
    if migrate:
        from mempipe.migrations import migrate as run_migrations

        run_migrations(store)
    store.load_declarations()
    return store
