"""The store contract suite runs against every backend named in ``MEMPIPE_CONTRACT_BACKENDS``
(comma-separated; default ``in-memory,sqlite,mongomock,atlas-strict,secantus`` — SecantusDB, a
wire-protocol server without search — plus ``mongodb`` whenever
``MEMPIPE_MONGODB_URI`` points at a server, e.g. the ``mongodb/mongodb-atlas-local`` image).
A backend adds a factory here and passes the same tests."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from pathlib import Path

import pytest

from mempipe.adapters.store import Store
from tests.fakes import atlas
from tests.stores import (
    MONGODB_URI,
    SEARCH_SYNC_S,
    atlas_strict_store,
    in_memory_store,
    mongodb_store,
    mongomock_store,
    secantus_store,
    sqlite_store,
)

BACKENDS: dict[str, Callable[[Path], Store]] = {
    "in-memory": in_memory_store,
    "sqlite": sqlite_store,
    "mongomock": mongomock_store,
    "atlas-strict": atlas_strict_store,
    "mongodb": mongodb_store,
}
DEFAULT = "in-memory,sqlite,mongomock,atlas-strict,secantus" + (",mongodb" if MONGODB_URI else "")
SELECTED = [b.strip() for b in os.environ.get("MEMPIPE_CONTRACT_BACKENDS", DEFAULT).split(",")]


IN_MEMORY_REPOSITORIES = {"turns", "work", "memories", "audit"}
"""What the in-memory fake implements: a contract test marked with no more than these runs on
it as on the real backends."""
WITHOUT_SEARCH = {"secantus"}
"""Backends on a server without search: the roles that need it (search; models, whose switch
waits for a queryable vector index) are what mempipe refuses there, so their tests are not run
on them."""
NEED_SEARCH = {"search", "models"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A contract test runs on the in-memory fake only when it is marked with repositories the
    fake implements; the others are not collected for it."""
    kept, dropped = [], []
    for item in items:
        marked = item.get_closest_marker("repositories")
        roles = set(marked.args) if marked is not None else set()
        fits = marked is not None and roles <= IN_MEMORY_REPOSITORIES
        on_fake = "[in-memory" in item.nodeid
        no_search = any(f"[{b}" in item.nodeid for b in WITHOUT_SEARCH) and roles & NEED_SEARCH
        (dropped if (on_fake and not fits) or no_search else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(params=SELECTED)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "secantus":
        store = secantus_store(request.getfixturevalue("secantus_uri"))
        yield store
        store._client.drop_database(store.db.name)
        store.close()
        return
    if request.param not in BACKENDS:
        pytest.fail(f"no contract factory for backend {request.param!r}")

    with atlas.strict() if request.param == "atlas-strict" else nullcontext():
        store = BACKENDS[request.param](tmp_path)
        yield store
    if request.param == "mongodb":
        store._client.drop_database(store.db.name)
    store.close()


@pytest.fixture
def searchable(backend: Store) -> Callable[[], None]:
    """Call before a search: a real server's search indexes must be queryable and caught up
    with the writes (mongot syncs asynchronously); the embedded and mocked stores are at once."""

    def wait() -> None:
        if not backend.url.startswith("mongodb") or "mongomock/contract" in backend.url:
            return
        if not backend.capabilities.search:
            return  # nothing to wait for: reconciliation compares by exact scan
        for status in backend.index_status():
            backend.search_indexes.wait_queryable(
                backend._collection(status.collection), status.name
            )
        time.sleep(atlas.SYNC_DELAY_S if "mongomock" in backend.url else SEARCH_SYNC_S)

    return wait
