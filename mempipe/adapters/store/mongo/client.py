"""The MongoDB implementation of the store port; the roles are mixed in from their modules.

Writes are idempotent: turns are inserted with an unordered ``bulk_write`` against the unique
turn key (a duplicate-key error is a skipped record; any other write error comes back as a
reject), snapshots and memories have deterministic ids. A write transaction is a real
multi-document transaction: the deployment must have them (replica sets and sharded clusters:
Atlas, ``mongodb-atlas-local``, any deployment running mongot); a standalone server is refused
when the store is opened.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from pymongo import MongoClient
from pymongo.database import Database
from pymongo.errors import ConnectionFailure, OperationFailure, PyMongoError

from mempipe.adapters.store.mongo import migrations
from mempipe.adapters.store.mongo.audit import MongoAuditLog
from mempipe.adapters.store.mongo.base import CAPABILITIES, MongoCapabilities, now
from mempipe.adapters.store.mongo.batches import MongoProviderBatches
from mempipe.adapters.store.mongo.configuration import MongoConfig
from mempipe.adapters.store.mongo.erasure import MongoErasure
from mempipe.adapters.store.mongo.exceptions import (
    NO_SEARCH_CODES,
    NO_SEARCH_HINT,
    SearchUnavailableError,
)
from mempipe.adapters.store.mongo.files import MongoFileLog
from mempipe.adapters.store.mongo.indexes import MongoIndexAdmin
from mempipe.adapters.store.mongo.leases import MongoLeases
from mempipe.adapters.store.mongo.memories import MongoMemories
from mempipe.adapters.store.mongo.registry import MongoRegistry
from mempipe.adapters.store.mongo.retention import MongoRetention
from mempipe.adapters.store.mongo.runs import MongoRunLog
from mempipe.adapters.store.mongo.search import MongoSearch
from mempipe.adapters.store.mongo.search_indexes import SearchIndexes
from mempipe.adapters.store.mongo.transfer import MongoTransfer
from mempipe.adapters.store.mongo.turns import MongoTurns
from mempipe.adapters.store.mongo.vectors import MongoVectors
from mempipe.adapters.store.mongo.work import MongoWorkQueue
from mempipe.errors import StoreError
from mempipe.migrations import Migration
from mempipe.schemas.memory import MEMORY_COLLECTIONS
from mempipe.schemas.snapshot import ExtractionStatus
from mempipe.schemas.summaries import StoreStats

SNAPSHOT_STATES = [
    {
        "$project": {
            "s": {
                "$map": {
                    "input": {"$objectToArray": {"$ifNull": ["$extraction", {}]}},
                    "in": "$$this.v.status",
                }
            }
        }
    },
    {
        "$project": {
            "state": {
                "$switch": {
                    "branches": [
                        {"case": {"$in": ["failed_content", "$s"]}, "then": "failed_content"},
                        {"case": {"$in": ["failed_retryable", "$s"]}, "then": "failed_retryable"},
                        {
                            "case": {
                                "$or": [{"$in": ["pending", "$s"]}, {"$eq": [{"$size": "$s"}, 0]}]
                            },
                            "then": "pending",
                        },
                    ],
                    "default": "done",
                }
            }
        }
    },
    {"$group": {"_id": "$state", "n": {"$sum": 1}}},
]


EXTRACTION_STATES = [
    {"$project": {"e": {"$objectToArray": {"$ifNull": ["$extraction", {}]}}}},
    {"$unwind": "$e"},
    {"$group": {"_id": {"handler": "$e.k", "status": "$e.v.status"}, "n": {"$sum": 1}}},
]


def detect_capabilities(client: MongoClient, db: Database) -> MongoCapabilities:
    """Transactions on replica sets and sharded clusters; search where Atlas Search or mongot
    answers. A server that cannot be reached fails here, once (after the server-selection
    timeout), not again at the next question."""
    try:
        hello = client.admin.command("hello")
        transactions = "setName" in hello or hello.get("msg") == "isdbgrid"
    except ConnectionFailure:
        raise
    except (PyMongoError, NotImplementedError):
        transactions = False
    return MongoCapabilities(transactions=transactions, search=has_search(db))


def require_transactions(capabilities: MongoCapabilities, where: str) -> None:
    """Refuse a standalone server: an extraction's writes (the new version, the superseded
    old one, reinforcements, audit rows, its state) commit together or not at all."""
    if not capabilities.transactions:
        raise StoreError(
            f"{where}: this MongoDB deployment has no multi-document transactions (a "
            "standalone server); mempipe needs a replica set or a sharded cluster (Atlas, "
            "mongodb-atlas-local, or mongod --replSet with a one-member replica set)"
        )


def has_search(db: Database) -> bool:
    """Whether the deployment answers the search-index API: not a replica set without mongot
    (SearchNotEnabled; MongoDB before 8.2 and compatible servers answer CommandNotSupported to
    ``$listSearchIndexes``). Told by the error code, not its text."""
    try:
        list(db["_migrations"].list_search_indexes())
    except OperationFailure as exc:
        if exc.code in NO_SEARCH_CODES:
            return False
        raise
    return True


class MongoStore(
    MongoTurns,
    MongoWorkQueue,
    MongoMemories,
    MongoAuditLog,
    MongoVectors,
    MongoRegistry,
    MongoSearch,
    MongoIndexAdmin,
    MongoRunLog,
    MongoLeases,
    MongoTransfer,
    MongoErasure,
    MongoRetention,
    MongoFileLog,
    MongoProviderBatches,
):
    """One MongoDB database with Atlas Search / mongot vector and text indexes."""

    def __init__(self, config: MongoConfig, client: MongoClient) -> None:
        self.config = config
        self.url = config.display_url
        self._client = client
        self._queryable = set()
        self.db = client.get_database(config.database)
        with self._errors("connecting"):
            self.capabilities = detect_capabilities(client, self.db)
            require_transactions(self.capabilities, self.url)
        self.search_indexes = SearchIndexes(self.url, config.index_timeout_s, config.index_poll_s)

    @contextmanager
    def write_transaction(self) -> Iterator[None]:
        if self._rehearsing:
            yield
            return
        with (
            self._errors("transaction"),
            self._client.start_session() as session,
            session.start_transaction(),
        ):
            self._session = session
            try:
                yield
            finally:
                self._session = None

    @contextmanager
    def rehearsal(self) -> Iterator[None]:
        """A transaction that is aborted at its end; write transactions inside join it."""
        with (
            self._errors("rehearsal"),
            self._client.start_session() as session,
            session.start_transaction(),
        ):
            self._session, self._rehearsing = session, True
            try:
                yield
            finally:
                self._session, self._rehearsing = None, False
                session.abort_transaction()

    def check_integrity(self, *, full: bool = False) -> list[str]:
        """The server keeps its own files sound (WiredTiger checksums every block)."""
        return []

    def applied_migrations(self) -> list[str]:
        with self._errors("migrations"):
            return [d["_id"] for d in self.db["_migrations"].find().sort("_id", 1)]

    def apply_migration(self, migration: Migration) -> None:
        with self._errors(f"migration {migration.id}"):
            step = migration.step(migrations.__name__)
            if step is not None:
                step(self)
            self.db["_migrations"].update_one(
                {"_id": migration.id},
                {"$setOnInsert": {"description": migration.description, "applied_at": now()}},
                upsert=True,
            )

    def stats(self) -> StoreStats:
        with self._errors("stats"):
            turns = self.db["turns"]
            sessions = list(
                turns.aggregate(
                    [
                        {
                            "$group": {
                                "_id": {
                                    f: f"${f}"
                                    for f in ("org_id", "project_id", "user_id", "session_id")
                                }
                            }
                        },
                        {"$count": "n"},
                    ]
                )
            )
            snapshots = {state.value: 0 for state in ExtractionStatus}
            snapshots.update(
                {d["_id"]: d["n"] for d in self.db["snapshots"].aggregate(SNAPSHOT_STATES)}
            )
            snapshots["total"] = sum(snapshots.values())
            extraction: dict[str, dict[str, int]] = {}
            for d in self.db["snapshots"].aggregate(EXTRACTION_STATES):
                extraction.setdefault(d["_id"]["handler"], {})[d["_id"]["status"]] = d["n"]
            memories = {
                c: {"active": 0, "superseded": 0} | self._count_by(c, "status")
                for c in MEMORY_COLLECTIONS
            }
            failures = {"environmental": 0, "content": 0} | self._count_by(
                "failures", "failure_class"
            )
            return StoreStats(
                store=self.url,
                turns=turns.estimated_document_count(),
                unpromoted_turns=turns.count_documents({"snapshot_id": None}),
                sessions=sessions[0]["n"] if sessions else 0,
                snapshots=snapshots,
                extraction=extraction,
                memories=memories,
                failures=failures,
                runs=self._count_by("runs", "status"),
            )

    def _count_by(self, collection: str, field: str) -> dict[str, int]:
        pipeline = [{"$group": {"_id": f"${field}", "n": {"$sum": 1}}}]
        return {d["_id"]: d["n"] for d in self.db[collection].aggregate(pipeline)}

    def record_capabilities(self) -> None:
        with self._errors("capabilities"):
            self.db[CAPABILITIES].replace_one(
                {"_id": "server"},
                {
                    "_id": "server",
                    "search": self.capabilities.search,
                    "vector_search": self.capabilities.search,
                    "checked_at": now(),
                },
                upsert=True,
            )

    def require_search(self, job: str) -> None:
        if not self.capabilities.search:
            raise SearchUnavailableError(
                f"{self.url}: {job} needs search indexes, which this MongoDB "
                f"deployment does not have (no Atlas Search, no mongot); nothing was changed: "
                f"{NO_SEARCH_HINT}"
            )

    def require_reconcilable(self, memory_types: Sequence[str]) -> None:
        if self.capabilities.search:
            return
        limit = self.config.exact_scan_limit
        owner = {f: f"${f}" for f in ("org_id", "project_id", "user_id", "agent_id")}
        for memory_type in memory_types:
            with self._errors(memory_type):
                largest = next(
                    self._collection(memory_type).aggregate(
                        [
                            {"$match": {"status": "active"}},
                            {"$group": {"_id": owner, "n": {"$sum": 1}}},
                            {"$sort": {"n": -1}},
                            {"$limit": 1},
                        ]
                    ),
                    None,
                )
            if largest is not None and largest["n"] > limit:
                who = "/".join(str(v) for v in largest["_id"].values() if v is not None)
                raise StoreError(
                    f"{self.url}: {who} holds {largest['n']} {memory_type} memories, more than "
                    f"the {limit} reconciliation compares by exact scan on a server without "
                    "vector search (MEMPIPE_MONGODB_EXACT_SCAN_LIMIT); nothing was changed: "
                    f"{NO_SEARCH_HINT}"
                )

    def close(self) -> None:
        self._client.close()
