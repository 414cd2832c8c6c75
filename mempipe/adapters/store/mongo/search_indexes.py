"""The search-index API (create, update, list, drop) and waiting until an index is queryable.

Atlas builds search indexes asynchronously: a definition is accepted at once and becomes
queryable later. Every wait is bounded and ends in a clear error, never in silent empty
results.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pymongo.collection import Collection
from pymongo.errors import OperationFailure, PyMongoError
from pymongo.operations import SearchIndexModel

from mempipe.adapters.store.mongo.exceptions import translate
from mempipe.errors import StoreError

INDEX_ALREADY_EXISTS = 68


class IndexNotQueryableError(StoreError):
    """A search index did not become queryable in time (or its build failed)."""


class SearchIndexes:
    def __init__(
        self,
        where: str,
        timeout_s: float,
        poll_s: float,
        sleep: Callable[[float], Any] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.where = where
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self._sleep = sleep
        self._clock = clock

    def get(self, collection: Collection, name: str) -> dict[str, Any] | None:
        """The index as the server reports it (``status``, ``queryable``, ``latestDefinition``)."""
        try:
            found = list(collection.list_search_indexes(name))
        except PyMongoError as exc:
            raise translate(exc, f"{self.where} {collection.name}.{name}") from exc
        return found[0] if found else None

    def definition(self, collection: Collection, name: str) -> dict[str, Any] | None:
        index = self.get(collection, name)
        return None if index is None else index.get("latestDefinition", {})

    def create(
        self, collection: Collection, name: str, kind: str, definition: dict[str, Any]
    ) -> bool:
        """True when created; False when another worker created it meanwhile."""
        try:
            collection.create_search_index(
                SearchIndexModel(definition=definition, name=name, type=kind)
            )
        except OperationFailure as exc:
            if exc.code == INDEX_ALREADY_EXISTS:
                return False
            raise translate(exc, f"{self.where}: creating {collection.name}.{name}") from exc
        except PyMongoError as exc:
            raise translate(exc, f"{self.where}: creating {collection.name}.{name}") from exc
        return True

    def ensure(
        self, collection: Collection, name: str, kind: str, definition: dict[str, Any]
    ) -> bool:
        """Create the index unless one of that name exists; True when created."""
        if self.get(collection, name) is not None:
            return False
        return self.create(collection, name, kind, definition)

    def update(self, collection: Collection, name: str, definition: dict[str, Any]) -> None:
        try:
            collection.update_search_index(name, definition)
        except PyMongoError as exc:
            raise translate(exc, f"{self.where}: updating {collection.name}.{name}") from exc

    def drop(self, collection: Collection, name: str) -> None:
        if self.get(collection, name) is None:
            return
        try:
            collection.drop_search_index(name)
        except PyMongoError as exc:
            raise translate(exc, f"{self.where}: dropping {collection.name}.{name}") from exc

    def wait_queryable(self, collection: Collection, name: str) -> None:
        """Return once the index answers queries with its latest definition; raise
        :class:`IndexNotQueryableError` when the build fails or the timeout passes."""
        deadline = self._clock() + self.timeout_s
        status = "absent"
        while True:
            index = self.get(collection, name)
            if index is not None:
                status = index.get("status", "unknown")
                if status == "FAILED":
                    raise IndexNotQueryableError(
                        f"{self.where}: search index {collection.name}.{name} failed to build: "
                        f"{index.get('message') or 'no reason given'}"
                    )
                if index.get("queryable") and status == "READY":
                    return
            left = deadline - self._clock()
            if left <= 0:
                raise IndexNotQueryableError(
                    f"{self.where}: search index {collection.name}.{name} is not queryable after "
                    f"{self.timeout_s:g} s (status {status}); raise MEMPIPE_MONGODB_INDEX_TIMEOUT "
                    "or check the search nodes / mongot, then run `mempipe rebuild-indexes`"
                )
            self._sleep(min(self.poll_s, left))
