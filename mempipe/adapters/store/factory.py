"""Open a store from its URL; the scheme picks the backend: the built-ins below, and any that an
installed package registers under the entry-point group ``mempipe.store_backends`` (the entry
point's name is the URL scheme; its object is called as ``opener(url, read_only=...)`` and
returns a :class:`Store`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from urllib.parse import urlsplit

from mempipe.adapters.store.base import Store
from mempipe.credentials import connect_url, public_url
from mempipe.errors import CREATE_HINT, StoreDamagedError, StoreError
from mempipe.plugins import installed

ENTRY_POINT_GROUP = "mempipe.store_backends"
Opener = Callable[..., Store]


def _sqlite(url: str, *, read_only: bool) -> Store:
    from mempipe.adapters.store.sqlite.factory import open_sqlite_store

    return open_sqlite_store(url, existing=read_only)


def _mongodb(url: str, *, read_only: bool) -> Store:
    from mempipe.adapters.store.mongo.factory import open_mongo_store

    return open_mongo_store(connect_url(url))


BUILT_IN: dict[str, Opener] = {"sqlite": _sqlite, "mongodb": _mongodb, "mongodb+srv": _mongodb}


def make_room(url: str) -> str | None:
    """What ``mempipe init`` does before it creates a store: a SQLite file's folder is made,
    with its parents, and returned (None when it was there); a server's store needs nothing.
    Nothing else makes a folder: a job's typo'd store path is an error."""
    if (urlsplit(url).scheme if "://" in url else "sqlite") != "sqlite":
        return None
    from mempipe.adapters.store.sqlite.configuration import config_from_url

    folder = config_from_url(url).path.parent
    if folder.is_dir():
        return None
    try:
        folder.mkdir(parents=True)
    except OSError as exc:
        raise StoreError(
            f"{public_url(url)!r}: cannot make {str(folder)!r}: {exc.strerror}"
        ) from exc
    return str(folder)


def schemes() -> list[str]:
    """Every backend's URL scheme, the plug-ins' read from their entry points."""
    return [*BUILT_IN, *(p.name for p in installed(ENTRY_POINT_GROUP))]


@functools.cache
def _plugin(scheme: str) -> Opener | None:
    point = next((p for p in installed(ENTRY_POINT_GROUP) if p.name == scheme), None)
    return None if point is None else point.load()


def open_store(
    url: str, *, migrate: bool = False, read_only: bool = False, existing: bool = False
) -> Store:
    """Open the store named by ``url``: ``sqlite:///path.db`` (a bare path means SQLite),
    ``mongodb://HOST/DB`` or ``mongodb+srv://HOST/DB``; a MongoDB URL's password may be
    ``***``, the one this process keeps for it (:func:`~mempipe.credentials.connect_url`).

    Opening changes nothing: migrating is an explicit step (``migrate=True``, which
    :func:`mempipe.bootstrap.prepare_store` asks for: ``mempipe migrate`` and the commands that
    create a store). ``existing``: the store must already be there, set up by mempipe (a
    command that works on a store never creates one: a typo'd path is an error, and nothing is
    created). ``read_only`` is for commands that only read: the store must already exist and be
    a mempipe store with every migration applied; nothing is created or changed.
    """
    scheme = urlsplit(url).scheme if "://" in url else "sqlite"
    opener = BUILT_IN.get(scheme) or _plugin(scheme)
    if opener is None:
        raise StoreError(
            f"unsupported store URL scheme {scheme!r} in {public_url(url)!r}; "
            f"supported: {', '.join(schemes())}"
        )
    store = opener(url, read_only=read_only or existing)
    try:
        if read_only:
            require_migrated(store)
        elif existing:
            require_store(store)
    except StoreError:
        store.close()
        raise
    return finish_opening(store, migrate=migrate and not read_only)


def require_store(store: Store) -> None:
    """Refuse a store that mempipe never set up, without writing."""
    if not store.applied_migrations():
        raise StoreError(
            f"{store.url} is not a mempipe store (no migrations recorded); nothing was changed. "
            f"{CREATE_HINT}."
        )


def require_migrated(store: Store) -> None:
    """Refuse a store that mempipe never set up, or one that needs migrations, without writing."""
    from mempipe.migrations import pending

    require_store(store)
    missing = [m.id for m in pending(store)]
    if missing:
        raise StoreError(
            f"{store.url} needs migrations {', '.join(missing)}; run `mempipe migrate` first"
        )


def finish_opening(store: Store, *, migrate: bool = True) -> Store:
    """Apply pending migrations (unless told not to) and load the store's declarations. A store
    opened to be written (migrated) is checked first: a damaged one is refused, unchanged."""
    if migrate:
        from mempipe.migrations import migrate as run_migrations

        problems = store.check_integrity()
        if problems:
            store.close()
            raise StoreDamagedError(store.url, "; ".join(problems[:3]))

        run_migrations(store)
    store.load_declarations()
    return store
