"""What the MongoDB store's parts share: the database, the session of the current write
transaction, the undo journal used where transactions are not available, and error
translation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from pymongo import ReturnDocument
from pymongo.client_session import ClientSession
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import PyMongoError

from mempipe.adapters.store.base import StoreCapabilities
from mempipe.adapters.store.mongo.configuration import MongoConfig
from mempipe.adapters.store.mongo.documents import collection_name
from mempipe.adapters.store.mongo.exceptions import translate
from mempipe.adapters.store.mongo.search_indexes import SearchIndexes
from mempipe.errors import StoreError
from mempipe.schemas.embedding import RegistryEntry

REGISTRY = "embedding_registry"


def now() -> datetime:
    return datetime.now(UTC)


class MongoParts:
    url: str
    config: MongoConfig
    capabilities: StoreCapabilities
    db: Database
    search_indexes: SearchIndexes
    partition_keys: tuple[str, ...] = ()
    custom_types: tuple[str, ...] = ()
    _session: ClientSession | None = None
    _queryable: set[tuple[str, str]]
    _undo: list[Callable[[], Any]] | None = None

    @contextmanager
    def _errors(self, what: str = "") -> Iterator[None]:
        try:
            yield
        except PyMongoError as exc:
            raise translate(exc, f"{self.url}{' ' + what if what else ''}") from exc

    def _collection(self, collection: str) -> Collection:
        return self.db[collection_name(collection)]

    def _on_undo(self, step: Callable[[], Any]) -> None:
        """Remember how to reverse a write made inside a write transaction on a deployment
        without transactions (run in reverse order if the transaction body fails)."""
        if self._undo is not None:
            self._undo.append(step)

    def _next_ids(self, name: str, count: int) -> range:
        """``count`` fresh integer ids for a collection (outside any transaction: a range taken
        by a write that then fails is simply never used)."""
        with self._errors("allocating ids"):
            counter = self.db["counters"].find_one_and_update(
                {"_id": name},
                {"$inc": {"value": count}},
                upsert=True,
                return_document=ReturnDocument.AFTER,
            )
        end = counter["value"]
        return range(end - count + 1, end + 1)

    def _entry(self, collection: str, model_id: str) -> dict[str, Any]:
        with self._errors("registry"):
            entry = self.db[REGISTRY].find_one({"_id": f"{collection}:{model_id}"})
        if entry is None:
            raise StoreError(f"{collection}: no vector index for {model_id}")
        return entry

    def registry(self) -> list[RegistryEntry]:
        with self._errors("registry"):
            entries = list(self.db[REGISTRY].find().sort([("collection", 1), ("created_at", 1)]))
        return [
            RegistryEntry(
                collection=e["collection"],
                model_id=e["model_id"],
                dimensions=e["dimensions"],
                state=e["state"],
                vector_table=e["vector_table"],
            )
            for e in entries
        ]

    def active_embedding(self, collection: str) -> tuple[str, int] | None:
        """The serving model; while a switch is in flight (two marked serving for an instant
        on a deployment without transactions) the newer one."""
        with self._errors("registry"):
            entry = self.db[REGISTRY].find_one(
                {"collection": collection, "state": "serving"}, sort=[("serving_since", -1)]
            )
        return None if entry is None else (entry["model_id"], entry["dimensions"])
