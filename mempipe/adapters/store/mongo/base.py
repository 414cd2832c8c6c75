"""What every role of the MongoDB store shares: the database, the session of the current write
transaction, and error translation."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pymongo import ReturnDocument
from pymongo.client_session import ClientSession
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import PyMongoError

from mempipe.adapters.store.mongo.configuration import MongoConfig
from mempipe.adapters.store.mongo.documents import collection_name
from mempipe.adapters.store.mongo.exceptions import translate
from mempipe.adapters.store.mongo.search_indexes import SearchIndexes
from mempipe.errors import StoreError
from mempipe.schemas.indexes import UNQUANTIZED, Quantization

REGISTRY = "embedding_registry"
CAPABILITIES = "capabilities"
"""What the server could do when the store was last prepared (search, vector search)."""
TRANSACTION_BUDGET = 500
"""Documents one transaction may write: MongoDB aborts a transaction after 60 s by default and
advises modifying well under 1,000 documents in one ("Production considerations",
transactionLifetimeLimitSeconds); large jobs are cut into chunks of this size."""
T = TypeVar("T")


def now() -> datetime:
    return datetime.now(UTC)


def budgeted(items: Sequence[T], cost: Callable[[T], int], budget: int) -> Iterator[list[T]]:
    """``items`` in order, cut into chunks whose costs add up to at most ``budget`` (a single
    item over it is a chunk of its own)."""
    chunk: list[T] = []
    spent = 0
    for item in items:
        price = cost(item)
        if chunk and spent + price > budget:
            yield chunk
            chunk, spent = [], 0
        chunk.append(item)
        spent += price
    if chunk:
        yield chunk


class MongoCapabilities(BaseModel):
    """What the connected deployment offers, detected once at connect time."""

    model_config = ConfigDict(frozen=True)

    transactions: bool
    search: bool = Field(
        default=True,
        description="Atlas Search / mongot: text and vector search indexes and queries",
    )


class MongoParts:
    """Mixed into :class:`MongoStore` under each role; holds its database."""

    url: str
    config: MongoConfig
    capabilities: MongoCapabilities
    db: Database
    search_indexes: SearchIndexes
    partition_keys: tuple[str, ...] = ()
    custom_types: tuple[str, ...] = ()
    quantization: Mapping[str, Quantization] = UNQUANTIZED
    _session: ClientSession | None = None
    _rehearsing: bool = False
    _queryable: set[tuple[str, str]]

    @contextmanager
    def _errors(self, what: str = "") -> Iterator[None]:
        try:
            yield
        except PyMongoError as exc:
            raise translate(exc, f"{self.url}{' ' + what if what else ''}") from exc

    def _collection(self, collection: str) -> Collection:
        return self.db[collection_name(collection)]

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
