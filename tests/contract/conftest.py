"""The store contract suite runs against every backend named in ``MEMPIPE_CONTRACT_BACKENDS``
(comma-separated; default ``in-memory,sqlite,mongomock,atlas-strict,secantus`` — SecantusDB, a
wire-protocol server without search — plus ``mongodb`` whenever
``MEMPIPE_MONGODB_URI`` points at a server, e.g. the ``mongodb/mongodb-atlas-local`` image).
A backend adds a factory here and passes the same tests."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from pathlib import Path

import pytest

from mempipe.adapters.store import Store, open_store
from mempipe.adapters.store.factory import finish_opening
from mempipe.adapters.store.mongo.factory import open_mongo_store
from tests.fakes import atlas
from tests.fakes.memory_store import InMemoryStore

MONGODB_URI = os.environ.get("MEMPIPE_MONGODB_URI")
SEARCH_SYNC_S = 2.0


def sqlite_store(tmp_path: Path) -> Store:
    return open_store(f"sqlite:///{tmp_path / 'contract.db'}", migrate=True)


def mongomock_store(tmp_path: Path) -> Store:
    return finish_opening(open_mongo_store("mongodb://mongomock/contract", client=atlas.client()))


def atlas_strict_store(tmp_path: Path) -> Store:
    """The Atlas fake as strict as Atlas: a replica set with transactions, indexes that build,
    update and drop over time, search that lags writes (:func:`atlas.strict` is on)."""
    store = open_mongo_store("mongodb://mongomock/strict", client=atlas.client())
    store.search_indexes.poll_s = 0.02
    return finish_opening(store)


def mongodb_store(tmp_path: Path) -> Store:
    """A fresh database on the real server named by ``MEMPIPE_MONGODB_URI``."""
    if not MONGODB_URI:
        pytest.skip("MEMPIPE_MONGODB_URI is not set")
    base = MONGODB_URI.split("?")[0].rstrip("/")
    if base.count("/") > 2:
        base = base.rsplit("/", 1)[0]
    query = f"?{MONGODB_URI.split('?', 1)[1]}" if "?" in MONGODB_URI else ""
    return open_store(f"{base}/mempipe_contract_{uuid.uuid4().hex[:8]}{query}", migrate=True)


def secantus_store(uri: str) -> Store:
    """A fresh database on the session's SecantusDB server: the wire protocol, real sessions
    and transactions, no search."""
    return open_store(f"{uri}/contract_{uuid.uuid4().hex[:8]}?replicaSet=secantus", migrate=True)


def in_memory_store(tmp_path: Path) -> Store:
    """The in-memory fake the service tests run on: it implements the turns, work, memories
    and audit repositories, and the tests of those run on it too."""
    return InMemoryStore()  # type: ignore[return-value]


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
