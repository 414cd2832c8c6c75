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

DELETING = "DELETING"
DROP_IN_PROGRESS = 20
"""A drop of an index that is already being dropped answers IllegalOperation (20)."""
INDEX_NOT_FOUND = 27


class IndexNotQueryableError(StoreError):
    """A search index did not become queryable in time (or its build failed)."""


def failure_reason(index: dict[str, Any]) -> str:
    """Why a build failed, where Atlas reports it: each search host's ``mainIndex`` and
    ``stagedIndex`` in ``statusDetail`` (the top-level ``message`` on older deployments)."""
    reasons = [
        part["message"]
        for detail in index.get("statusDetail") or []
        for part in (detail.get("mainIndex") or {}, detail.get("stagedIndex") or {})
        if part.get("message")
    ]
    if index.get("message"):
        reasons.append(index["message"])
    return "; ".join(dict.fromkeys(reasons)) or "no reason given"


def serving_definition(index: dict[str, Any]) -> dict[str, Any] | None:
    """The definition queries run against now: ``latestDefinition`` is only the last one
    accepted, and during an update (or after a failed one) the previous definition keeps
    serving, reported per host as ``statusDetail[*].mainIndex.definition``. Deployments that
    report no ``statusDetail`` serve their latest definition."""
    details = index.get("statusDetail")
    if not details:
        return index.get("latestDefinition")
    for detail in details:
        main = detail.get("mainIndex") or {}
        if main.get("queryable") and main.get("definition") is not None:
            return main["definition"]
    return None


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
        """The index as the server reports it (``status``, ``queryable``, ``latestDefinition``,
        ``statusDetail``)."""
        try:
            found = list(collection.list_search_indexes(name))
        except PyMongoError as exc:
            raise translate(exc, f"{self.where} {collection.name}.{name}") from exc
        return found[0] if found else None

    def definition(self, collection: Collection, name: str) -> dict[str, Any] | None:
        """The latest accepted definition: what drift is measured against."""
        index = self.get(collection, name)
        return None if index is None else index.get("latestDefinition", {})

    def serving(self, collection: Collection, name: str) -> dict[str, Any] | None:
        """The definition serving queries now: what query-time checks are made against."""
        index = self.get(collection, name)
        return None if index is None else serving_definition(index)

    def create(
        self, collection: Collection, name: str, kind: str, definition: dict[str, Any]
    ) -> bool:
        """True when created; False when another worker created it meanwhile (told by looking,
        not by an error code: Atlas documents none for a duplicate name)."""
        try:
            collection.create_search_index(
                SearchIndexModel(definition=definition, name=name, type=kind)
            )
        except PyMongoError as exc:
            existing = self.get(collection, name)
            if existing is not None and existing.get("status") != DELETING:
                return False
            raise translate(exc, f"{self.where}: creating {collection.name}.{name}") from exc
        return True

    def ensure(
        self, collection: Collection, name: str, kind: str, definition: dict[str, Any]
    ) -> bool:
        """Create the index unless one of that name exists; True when created. An index of that
        name still being dropped is waited out first (it cannot be created over)."""
        existing = self.get(collection, name)
        if existing is not None and existing.get("status") == DELETING:
            self.wait_gone(collection, name)
            existing = None
        if existing is not None:
            return False
        return self.create(collection, name, kind, definition)

    def update(self, collection: Collection, name: str, definition: dict[str, Any]) -> None:
        try:
            collection.update_search_index(name, definition)
        except PyMongoError as exc:
            raise translate(exc, f"{self.where}: updating {collection.name}.{name}") from exc

    def drop(self, collection: Collection, name: str) -> None:
        """Idempotent: an index absent or already being dropped is left to go."""
        existing = self.get(collection, name)
        if existing is None or existing.get("status") == DELETING:
            return
        try:
            collection.drop_search_index(name)
        except OperationFailure as exc:
            if exc.code in (DROP_IN_PROGRESS, INDEX_NOT_FOUND):
                return
            raise translate(exc, f"{self.where}: dropping {collection.name}.{name}") from exc
        except PyMongoError as exc:
            raise translate(exc, f"{self.where}: dropping {collection.name}.{name}") from exc

    def wait_until(self, done: Callable[[], bool], late: Callable[[], str]) -> None:
        """Poll ``done`` every ``poll_s`` until it holds; after ``timeout_s`` raise
        :class:`IndexNotQueryableError` with ``late()``'s message. Every wait on the search
        engine is this one, bounded."""
        deadline = self._clock() + self.timeout_s
        while not done():
            left = deadline - self._clock()
            if left <= 0:
                raise IndexNotQueryableError(late())
            self._sleep(min(self.poll_s, left))

    def wait_gone(self, collection: Collection, name: str) -> None:
        """Return once a dropped index is no longer listed (Atlas lists it as ``DELETING`` until
        its data is removed)."""
        self.wait_until(
            lambda: self.get(collection, name) is None,
            lambda: (
                f"{self.where}: search index {collection.name}.{name} is still being dropped "
                f"after {self.timeout_s:g} s; raise MEMPIPE_MONGODB_INDEX_TIMEOUT or retry"
            ),
        )

    def wait_queryable(self, collection: Collection, name: str) -> None:
        """Return once the index answers queries with its latest definition; raise
        :class:`IndexNotQueryableError` when the build fails or the timeout passes."""
        status = "absent"

        def ready() -> bool:
            nonlocal status
            index = self.get(collection, name)
            if index is None:
                return False
            status = index.get("status", "unknown")
            if status == "FAILED":
                raise IndexNotQueryableError(
                    f"{self.where}: search index {collection.name}.{name} failed to build: "
                    f"{failure_reason(index)}"
                )
            return bool(
                index.get("queryable")
                and status == "READY"
                and serving_definition(index) == index.get("latestDefinition")
            )

        self.wait_until(
            ready,
            lambda: (
                f"{self.where}: search index {collection.name}.{name} is not queryable after "
                f"{self.timeout_s:g} s (status {status}); raise MEMPIPE_MONGODB_INDEX_TIMEOUT "
                "or check the search nodes / mongot, then run `mempipe rebuild-indexes --force`"
            ),
        )
