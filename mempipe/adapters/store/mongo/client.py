"""The MongoDB implementation of the store port.

Writes are idempotent: turns are inserted with an unordered ``bulk_write`` against the unique
turn key (a duplicate-key error is a skipped record; any other write error comes back as a
reject), snapshots and memories have deterministic ids. A write transaction is a real
multi-document transaction where the deployment has them (replica sets and sharded clusters:
Atlas, ``mongodb-atlas-local``, any deployment running mongot); elsewhere the writes run in the
order reconciliation needs and are undone in reverse if the body fails (see the README's
recovery rule).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from pymongo import InsertOne, MongoClient, UpdateMany, UpdateOne
from pymongo.database import Database
from pymongo.errors import BulkWriteError, OperationFailure, PyMongoError

from mempipe.adapters.store.base import StoreCapabilities, conflict_reject, turn_reject
from mempipe.adapters.store.mongo import documents
from mempipe.adapters.store.mongo.base import MongoParts, now
from mempipe.adapters.store.mongo.configuration import MongoConfig
from mempipe.adapters.store.mongo.embeddings import MongoEmbeddingOps
from mempipe.adapters.store.mongo.exceptions import (
    NO_SEARCH_HINT,
    SEARCH_NOT_ENABLED,
    SearchUnavailableError,
    StoreUnavailableError,
    translate,
)
from mempipe.adapters.store.mongo.extraction import MongoExtractionOps
from mempipe.adapters.store.mongo.indexes import MongoIndexOps
from mempipe.adapters.store.mongo.leases import MongoLeaseOps
from mempipe.adapters.store.mongo.search import MongoSearchOps
from mempipe.adapters.store.mongo.search_indexes import SearchIndexes
from mempipe.domain.promotion import TurnStamp
from mempipe.schemas.memory import MEMORY_COLLECTIONS
from mempipe.schemas.reject import Reject
from mempipe.schemas.run import RunRecord, RunStatus
from mempipe.schemas.snapshot import ExtractionStatus, Snapshot
from mempipe.schemas.summaries import StoreStats, TurnWriteResult
from mempipe.schemas.turn import Turn

if TYPE_CHECKING:
    from mempipe.migrations import Migration

DUPLICATE_KEY = 11000
RANK_FUSION_SINCE = (8, 1)

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


def detect_capabilities(client: MongoClient) -> StoreCapabilities:
    """Transactions on replica sets and sharded clusters; ``$rankFusion`` from 8.1."""
    version = tuple(int(p) for p in client.server_info()["version"].split(".")[:2] if p.isdigit())
    try:
        hello = client.admin.command("hello")
        transactions = "setName" in hello or hello.get("msg") == "isdbgrid"
    except (PyMongoError, NotImplementedError):
        transactions = False
    return StoreCapabilities(
        transactions=transactions,
        vector_search=True,
        text_search=True,
        rank_fusion=version >= RANK_FUSION_SINCE,
    )


T = TypeVar("T")
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
"""MongoDB's BSON document size limit."""
SIZE_CHECK_FROM = 1024 * 1024
"""Turns with less text than this cannot reach the limit: only larger ones are measured."""
TRANSACTION_BUDGET = 500
"""Documents one transaction may write: MongoDB aborts a transaction after 60 s by default and
advises modifying well under 1,000 documents in one ("Production considerations",
transactionLifetimeLimitSeconds); large jobs are cut into chunks of this size."""


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


def require_search(db: Database) -> None:
    """Refuse, at connect time, a deployment without a search engine (a standalone server, or
    a replica set without mongot): every job needs vector search (reconciliation's candidates,
    re-embedding, search). Told by the error code, not its text."""
    try:
        list(db["_migrations"].list_search_indexes())
    except OperationFailure as exc:
        if exc.code == SEARCH_NOT_ENABLED:
            raise SearchUnavailableError(
                f"{db.name}: this MongoDB deployment has no search engine (SearchNotEnabled); "
                f"{NO_SEARCH_HINT}"
            ) from exc


class MongoStore(
    MongoExtractionOps,
    MongoSearchOps,
    MongoEmbeddingOps,
    MongoIndexOps,
    MongoLeaseOps,
    MongoParts,
):
    def __init__(self, config: MongoConfig, client: MongoClient) -> None:
        self.config = config
        self.url = config.display_url
        self._client = client
        self._queryable = set()
        self.db = client.get_database(config.database)
        with self._errors("connecting"):
            self.capabilities = detect_capabilities(client)
            require_search(self.db)
        self.search_indexes = SearchIndexes(self.url, config.index_timeout_s, config.index_poll_s)

    @contextmanager
    def write_transaction(self) -> Iterator[None]:
        if self.capabilities.transactions:
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
            return
        self._undo = []
        try:
            yield
        except BaseException:
            steps, self._undo = self._undo, None
            with self._errors("undoing a failed write"):
                for step in reversed(steps):
                    step()
            raise
        finally:
            self._undo = None

    # -- migrations -------------------------------------------------------------------------

    def applied_migrations(self) -> list[str]:
        with self._errors("migrations"):
            return [d["_id"] for d in self.db["_migrations"].find().sort("_id", 1)]

    def apply_migration(self, migration: Migration) -> None:
        with self._errors(f"migration {migration.id}"):
            if hasattr(migration.module, "mongodb"):
                migration.module.mongodb(self)
            self.db["_migrations"].update_one(
                {"_id": migration.id},
                {"$setOnInsert": {"description": migration.description, "applied_at": now()}},
                upsert=True,
            )

    # -- turns ------------------------------------------------------------------------------

    def insert_turns(self, turns: Sequence[Turn], run_id: str | None) -> TurnWriteResult:
        if not turns:
            return TurnWriteResult()
        ids = self._next_ids("turns", len(turns))
        oversize: list[Reject] = []
        requests: list[InsertOne] = []
        sent: list[Turn] = []
        for i, turn in zip(ids, turns, strict=True):
            document = documents.turn_document(i, turn, run_id)
            size = documents.bson_size(document) if len(turn.content) > SIZE_CHECK_FROM else 0
            if size > MAX_DOCUMENT_BYTES:
                reason = f"{size:,} bytes: over MongoDB's 16 MiB document limit"
                oversize.append(turn_reject(turn, reason))
            else:
                requests.append(InsertOne(document))
                sent.append(turn)
        write_errors: list[dict[str, Any]] = []
        inserted = 0
        try:
            if requests:
                inserted = self.db["turns"].bulk_write(requests, ordered=False).inserted_count
        except BulkWriteError as exc:
            if exc.details.get("writeConcernErrors"):
                raise StoreUnavailableError(
                    f"{self.url} turns: the write concern was not satisfied "
                    f"({exc.details['writeConcernErrors'][0].get('errmsg', '')}); the batch is "
                    "retried (turn writes are idempotent)"
                ) from exc
            inserted = exc.details["nInserted"]
            write_errors = exc.details["writeErrors"]
        except PyMongoError as exc:
            raise translate(exc, f"{self.url} turns") from exc
        duplicates = [sent[e["index"]] for e in write_errors if e["code"] == DUPLICATE_KEY]
        conflicts = self._conflicts(duplicates)
        failed = [
            turn_reject(sent[e["index"]], f"write error {e['code']}: {e.get('errmsg', '')}")
            for e in write_errors
            if e["code"] != DUPLICATE_KEY
        ]
        return TurnWriteResult(
            inserted=inserted,
            duplicates=len(duplicates) - len(conflicts),
            conflicts=[*conflicts, *failed, *oversize],
        )

    def _conflicts(self, duplicates: Sequence[Turn]) -> list[Reject]:
        """Skipped turns whose key is stored with other content: rejects, not duplicates."""
        if not duplicates:
            return []
        keys = [{f: getattr(t, f) for f in documents.TURN_KEY} for t in duplicates]
        with self._errors("turns"):
            stored = {
                tuple(d[f] for f in documents.TURN_KEY): d
                for d in self.db["turns"].find(
                    {"$or": keys},
                    {**{f: 1 for f in documents.TURN_KEY}, "role": 1, "content": 1, "source": 1},
                )
            }
        conflicts = []
        for turn in duplicates:
            found = stored[tuple(getattr(turn, f) for f in documents.TURN_KEY)]
            if (found["role"], found["content"]) == (turn.role.value, turn.content):
                continue
            source = found["source"]
            conflicts.append(
                conflict_reject(turn, source["path"], source.get("line"), source.get("index"))
            )
        return conflicts

    def count_unpromoted_turns(self) -> int:
        with self._errors("turns"):
            return self.db["turns"].count_documents({"snapshot_id": None})

    def iter_unpromoted_turns(self, page_size: int = 5000) -> Iterator[TurnStamp]:
        last: tuple[Any, ...] | None = None
        order = [(field, 1) for field in documents.TURN_KEY]
        while True:
            query: dict[str, Any] = {"snapshot_id": None}
            if last is not None:
                query.update(documents.after_key(last))
            with self._errors("turns"):
                page = list(self.db["turns"].find(query).sort(order).limit(page_size))
            if not page:
                return
            last = tuple(page[-1][f] for f in documents.TURN_KEY)
            for document in page:
                yield documents.stamp_from_document(document)
            if len(page) < page_size:
                return

    def save_snapshots(self, snapshots: Sequence[Snapshot]) -> set[str]:
        """Snapshots upserted (``$setOnInsert`` on the deterministic ``_id``: one already stored
        is left as it is, and no duplicate-key error is raised, which inside a transaction
        would abort it whatever ``ordered`` says), then their turns marked promoted. Each chunk
        of about ``TRANSACTION_BUDGET`` documents is one transaction where the deployment has
        them; without one, a crash between the two leaves turns that the next promotion cuts
        into the same snapshots again, which then only marks them."""
        created: set[str] = set()
        for chunk in budgeted(snapshots, lambda s: 1 + s.turn_count, TRANSACTION_BUDGET):
            created |= self._save_snapshot_chunk(chunk)
        return created

    def _save_snapshot_chunk(self, snapshots: Sequence[Snapshot]) -> set[str]:
        at = now()
        upserts = []
        for snapshot in snapshots:
            document = documents.snapshot_document(snapshot, at)
            key = document.pop("_id")
            upserts.append(UpdateOne({"_id": key}, {"$setOnInsert": document}, upsert=True))
        marks = [
            UpdateMany(
                {
                    "org_id": s.org_id,
                    "project_id": s.project_id,
                    "user_id": s.user_id,
                    "session_id": s.session_id,
                    "turn_seq": {"$gte": s.first_turn_seq, "$lte": s.last_turn_seq},
                    "snapshot_id": None,
                },
                {"$set": {"snapshot_id": s.snapshot_id}},
            )
            for s in snapshots
        ]
        with self.write_transaction(), self._errors("snapshots"):
            result = self.db["snapshots"].bulk_write(upserts, session=self._session)
            self.db["turns"].bulk_write(marks, session=self._session)
        return set(result.upserted_ids.values())

    # -- runs -------------------------------------------------------------------------------

    def start_run(self, run: RunRecord) -> None:
        document = documents.plain(run.model_dump())
        with self._errors("runs"):
            self.db["runs"].update_one(
                {"_id": run.run_id},
                {
                    "$set": {
                        k: document[k]
                        for k in (
                            "flow",
                            "status",
                            "parameters",
                            "started_at",
                            "host",
                            "pid",
                            "machine",
                            "heartbeat_at",
                        )
                    },
                    "$setOnInsert": {
                        k: document[k] for k in ("counts", "checkpoints", "error", "finished_at")
                    },
                },
                upsert=True,
            )

    def finish_run(
        self, run_id: str, status: RunStatus, counts: dict[str, int], error: str | None = None
    ) -> None:
        with self._errors("runs"):
            self.db["runs"].update_one(
                {"_id": run_id},
                {
                    "$set": {
                        "status": status.value,
                        "counts": counts,
                        "error": error,
                        "finished_at": now(),
                    }
                },
            )
            self.db["leases"].delete_many({"run_id": run_id})

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._errors("runs"):
            document = self.db["runs"].find_one({"_id": run_id})
        return None if document is None else self._run_from_document(document)

    def _run_from_document(self, document: dict[str, Any]) -> RunRecord:
        run_id = document.pop("_id")
        return RunRecord.model_validate({**document, "run_id": run_id})

    def save_checkpoint(self, run_id: str, name: str, value: Any) -> None:
        with self._errors("runs"):
            self.db["runs"].update_one(
                {"_id": run_id}, {"$set": {f"checkpoints.{documents.field_key(name)}": value}}
            )

    def resume_point(self, flow: str, name: str, run_id: str) -> Any | None:
        with self._errors("runs"):
            latest = self.db["runs"].find_one(
                {"flow": flow, "_id": {"$ne": run_id}}, sort=[("started_at", -1)]
            )
        if latest is None or latest["status"] == RunStatus.COMPLETED.value:
            return None
        return latest.get("checkpoints", {}).get(documents.field_key(name))

    # -- stats ------------------------------------------------------------------------------

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

    def close(self) -> None:
        self._client.close()
