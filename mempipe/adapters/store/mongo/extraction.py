"""The MongoDB store's extraction side: work selection, extraction states, failures,
long-term memories, reconciliation candidates and the audit log."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import suppress
from datetime import date, datetime, time, timedelta
from typing import Any

from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from mempipe.adapters.store.mongo import documents, pipelines
from mempipe.adapters.store.mongo.base import REGISTRY, MongoParts, now
from mempipe.domain.reconcile import Candidate
from mempipe.domain.scope import Scope
from mempipe.domain.vectors import cosine_similarity
from mempipe.errors import StoreError
from mempipe.schemas.audit import AuditRow
from mempipe.schemas.failure import Failure
from mempipe.schemas.memory import KEY_FIELDS, MemoryRecord
from mempipe.schemas.selection import SnapshotSelection
from mempipe.schemas.snapshot import ExtractionStatus
from mempipe.schemas.transcript import SnapshotContent, TurnLine
from mempipe.schemas.work import WorkItem

log = logging.getLogger(__name__)
RUNNABLE = [ExtractionStatus.PENDING.value, ExtractionStatus.FAILED_RETRYABLE.value]
WORK_ORDER = [("order_at", 1), ("session_id", 1), ("first_turn_seq", 1)]


def day_range(since: str | None, until: str | None) -> dict[str, Any]:
    """``at`` within the days ``since`` .. ``until`` (inclusive, UTC)."""
    bounds: dict[str, Any] = {}
    if since:
        bounds["$gte"] = documents.plain(datetime.combine(date.fromisoformat(since), time()))
    if until:
        end = date.fromisoformat(until) + timedelta(days=1)
        bounds["$lt"] = documents.plain(datetime.combine(end, time()))
    return {"at": bounds} if bounds else {}


class MongoExtractionOps(MongoParts):
    def extraction_work(
        self, selection: SnapshotSelection, handlers: Sequence[str], *, force: bool
    ) -> list[WorkItem]:
        if not handlers:
            return []
        if not self.capabilities.transactions:
            self.restore_orphaned_versions()
        query = documents.selection_query(selection)
        snapshots = self.db["snapshots"]
        with self._errors("snapshots"):
            for handler in handlers:
                snapshots.update_many(
                    {**query, f"extraction.{handler}": {"$exists": False}},
                    {"$set": {f"extraction.{handler}": self._state(ExtractionStatus.PENDING, 0)}},
                )
            wanted = [
                {f"extraction.{h}": {"$exists": True}}
                if force
                else {f"extraction.{h}.status": {"$in": RUNNABLE}}
                for h in handlers
            ]
            cursor = snapshots.find(
                {"$and": [query, {"$or": wanted}]},
                {"org_id": 1, "project_id": 1, "user_id": 1, "extraction": 1},
            ).sort(WORK_ORDER)
            return [
                WorkItem(
                    snapshot_id=d["_id"],
                    handler=h,
                    attempts=d["extraction"][h]["attempts"],
                    org_id=d["org_id"],
                    project_id=d["project_id"],
                    user_id=d.get("user_id"),
                )
                for d in cursor
                for h in sorted(handlers)
                if h in d["extraction"] and (force or d["extraction"][h]["status"] in RUNNABLE)
            ]

    def restore_orphaned_versions(self) -> int:
        """The recovery rule of a deployment without transactions. UPDATE supersedes the old
        version before writing the new one (the unique active-key index allows no other order);
        a crash between the two leaves a superseded record that nothing supersedes. It is made
        active again here, before work is handed out, and the extraction (never marked done)
        is redone. Returns how many were restored."""
        restored = 0
        for memory_type in documents.MEMORY_FIELDS:
            collection = self._collection(memory_type)
            with self._errors(memory_type):
                orphans = [
                    d["id"]
                    for d in collection.aggregate(
                        [
                            {"$match": {"status": "superseded"}},
                            {
                                "$lookup": {
                                    "from": collection.name,
                                    "localField": "id",
                                    "foreignField": "supersedes_id",
                                    "as": "successors",
                                }
                            },
                            {"$match": {"successors": {"$size": 0}}},
                            {"$project": {"id": 1}},
                        ]
                    )
                ]
                if orphans:
                    restored += collection.update_many(
                        {"id": {"$in": orphans}, "status": "superseded"},
                        {"$set": {"status": "active"}},
                    ).modified_count
        if restored:
            log.warning("restored %d superseded records a crashed UPDATE left behind", restored)
        return restored

    @staticmethod
    def _state(status: ExtractionStatus, attempts: int, error: str | None = None) -> dict[str, Any]:
        return {
            "status": status.value,
            "attempts": attempts,
            "last_error": error,
            "updated_at": now(),
        }

    def snapshot_times(self, snapshot_ids: Sequence[str]) -> dict[str, datetime]:
        with self._errors("snapshots"):
            found = self.db["snapshots"].find({"_id": {"$in": list(snapshot_ids)}}, {"order_at": 1})
            return {d["_id"]: d["order_at"] for d in found if d.get("order_at") is not None}

    def snapshot_content(self, snapshot_id: str) -> SnapshotContent:
        with self._errors("snapshots"):
            head = self.db["snapshots"].find_one({"_id": snapshot_id})
            if head is None:
                raise StoreError(f"no snapshot {snapshot_id!r}")
            turns = (
                self.db["turns"]
                .find(
                    {
                        "org_id": head["org_id"],
                        "project_id": head["project_id"],
                        "user_id": head.get("user_id"),
                        "session_id": head["session_id"],
                        "turn_seq": {"$gte": head["first_turn_seq"], "$lte": head["last_turn_seq"]},
                    },
                    {"role": 1, "content": 1, "created_at": 1},
                )
                .sort("turn_seq", 1)
            )
            lines = [
                TurnLine(role=t["role"], content=t["content"], created_at=t.get("created_at"))
                for t in turns
            ]
        return SnapshotContent(
            snapshot_id=snapshot_id,
            org_id=head["org_id"],
            project_id=head["project_id"],
            user_id=head.get("user_id"),
            agent_id=head.get("agent_id"),
            session_id=head["session_id"],
            turns=lines,
        )

    def rule_summarized(self, snapshot_ids: Sequence[str]) -> list[str]:
        with self._errors("snapshots"):
            return [
                d["_id"]
                for d in self.db["snapshots"].find(
                    {"_id": {"$in": list(snapshot_ids)}, "summary_source": "rules"}, {"_id": 1}
                )
            ]

    def set_snapshot_summary(self, snapshot_id: str, summary: str, source: str) -> None:
        with self._errors("snapshots"):
            self.db["snapshots"].update_one(
                {"_id": snapshot_id}, {"$set": {"summary": summary, "summary_source": source}}
            )

    def set_extraction_state(
        self,
        snapshot_id: str,
        handler: str,
        status: ExtractionStatus,
        attempts: int,
        error: str | None = None,
    ) -> None:
        """One atomic transition (``find_one_and_update``); the state it replaced is what an
        undo restores."""
        field = f"extraction.{handler}"
        with self._errors("snapshots"):
            before = self.db["snapshots"].find_one_and_update(
                {"_id": snapshot_id},
                {"$set": {field: self._state(status, attempts, error)}},
                projection={field: 1},
                return_document=ReturnDocument.BEFORE,
                session=self._session,
            )
        previous = (before or {}).get("extraction", {}).get(handler)
        if previous is not None:
            self._on_undo(
                lambda: self.db["snapshots"].update_one(
                    {"_id": snapshot_id}, {"$set": {field: previous}}
                )
            )

    def record_failure(self, failure: Failure) -> None:
        with self._errors("failures"):
            self.db["failures"].insert_one(
                documents.plain(failure.model_dump()), session=self._session
            )

    def ensure_vector_table(self, memory_type: str, model_id: str, dimensions: int) -> str:
        """The vector index new memories of a collection are written for. The first model of a
        collection starts serving it; any other model than the serving one is refused, naming
        both (a model change goes through ``mempipe reembed``). Returns once the index answers
        queries (checked once per store object)."""
        with self._errors("registry"):
            serving = self.db[REGISTRY].find_one(
                {"collection": memory_type, "state": "serving"}, sort=[("serving_since", -1)]
            )
        if serving and (serving["model_id"], serving["dimensions"]) != (model_id, dimensions):
            raise StoreError(
                f"{memory_type} is indexed with {serving['model_id']} ({serving['dimensions']} "
                f"dimensions); refusing vectors of {model_id} ({dimensions} dimensions): change "
                f"models with `mempipe reembed --model {model_id}`"
            )
        name = (
            self.register_model(memory_type, model_id, dimensions, "serving")
            if not serving
            else serving["vector_table"]
        )
        if (memory_type, name) not in self._queryable:
            # Reconciliation searches this index at once: one just created is still building.
            self.search_indexes.wait_queryable(self._collection(memory_type), name)
            self._queryable.add((memory_type, name))
        return name

    def register_model(self, collection: str, model_id: str, dimensions: int, state: str) -> str:
        """Register (collection, model) with its own vector field and create its vector search
        index beside the others (not waited for here: writes do not need it; the switch does)."""
        registry = self.db[REGISTRY]
        with self._errors("registry"):
            registered = registry.find_one({"_id": f"{collection}:{model_id}"})
            first = registry.count_documents({"collection": collection}) == 0
        if registered and registered["dimensions"] != dimensions:
            raise StoreError(
                f"{collection}: model {model_id} is registered with {registered['dimensions']} "
                f"dimensions, not {dimensions}"
            )
        if registered:
            return registered["vector_table"]
        name = pipelines.vector_index_name(model_id)
        path = pipelines.vector_path(model_id, first)
        self.search_indexes.ensure(
            self._collection(collection),
            name,
            "vectorSearch",
            pipelines.vector_index_definition(collection, path, dimensions, self.partition_keys),
        )
        # Workers of one run may register the same model at once: one document wins.
        with self._errors("registry"), suppress(DuplicateKeyError):
            registry.insert_one(
                {
                    "_id": f"{collection}:{model_id}",
                    "collection": collection,
                    "model_id": model_id,
                    "dimensions": dimensions,
                    "vector_table": name,
                    "path": path,
                    "state": state,
                    "created_at": now(),
                    "serving_since": now() if state == "serving" else None,
                }
            )
        return name

    def memory_candidates(
        self,
        memory_type: str,
        scope: Scope,
        key: str | None,
        vector: list[float] | None,
        model_id: str | None,
        k: int,
    ) -> list[Candidate]:
        """By exact key inside the transaction; by nearest vector through an exact
        ``$vectorSearch`` with the scope inside the stage; and, because a search index sees
        writes only after its sync delay (it is not transactional), the records of the scope
        written within ``sync_window_s`` are compared here directly, so two restatements a
        moment apart still meet."""
        collection = self._collection(memory_type)
        key_field = KEY_FIELDS.get(memory_type)
        query = documents.scope_query(scope, memory_type)
        found: dict[str, Candidate] = {}
        fields = {"id": 1, "text": 1, "evidence": 1, **({key_field: 1} if key_field else {})}
        with self._errors(memory_type):
            if key is not None and key_field is not None:
                for d in collection.find({**query, key_field: key}, fields, session=self._session):
                    found[d["id"]] = Candidate(
                        d["id"], key, d["text"], None, tuple(d.get("evidence") or ())
                    )
            if vector is not None and model_id is not None:
                entry = self._entry(memory_type, model_id)
                stages = [
                    pipelines.vector_search_stage(
                        entry["vector_table"], entry["path"], vector, k, query, exact=True
                    ),
                    {"$project": {**fields, "score": {"$meta": "vectorSearchScore"}}},
                ]
                for d in collection.aggregate(stages):
                    found[d["id"]] = Candidate(
                        d["id"],
                        d.get(key_field) if key_field else None,
                        d["text"],
                        pipelines.cosine(d["score"]),
                        tuple(d.get("evidence") or ()),
                    )
                recent = collection.find(
                    {
                        **query,
                        entry["path"]: {"$exists": True},
                        "updated_at": {
                            "$gte": now() - timedelta(seconds=self.config.sync_window_s)
                        },
                    },
                    {**fields, entry["path"]: 1},
                    session=self._session,
                )
                for d in recent:
                    found.setdefault(
                        d["id"],
                        Candidate(
                            d["id"],
                            d.get(key_field) if key_field else None,
                            d["text"],
                            cosine_similarity(vector, d[entry["path"]]),
                            tuple(d.get("evidence") or ()),
                        ),
                    )
        return list(found.values())

    def add_memory(
        self, memory_type: str, record: MemoryRecord, vector: list[float] | None
    ) -> None:
        (seq,) = self._next_ids(memory_type, 1)
        document = documents.memory_document(seq, record)
        if vector is not None and record.embedding_model_id is not None:
            document[self._entry(memory_type, record.embedding_model_id)["path"]] = list(vector)
        collection = self._collection(memory_type)
        with self._errors(memory_type):
            collection.insert_one(document, session=self._session)
        self._on_undo(lambda: collection.delete_one({"_id": seq}))

    def supersede_memory(self, memory_type: str, memory_id: str) -> int:
        """Mark the old version superseded (kept, vectors included); returns its version."""
        collection = self._collection(memory_type)
        with self._errors(memory_type):
            before = collection.find_one_and_update(
                {"id": memory_id},
                {"$set": {"status": "superseded", "updated_at": now()}},
                projection={"version": 1, "status": 1, "updated_at": 1},
                return_document=ReturnDocument.BEFORE,
                session=self._session,
            )
        if before is None:
            raise StoreError(f"{memory_type}: no memory {memory_id!r} to supersede")
        restore = {"status": before["status"], "updated_at": before["updated_at"]}
        self._on_undo(lambda: collection.update_one({"id": memory_id}, {"$set": restore}))
        return before["version"]

    def reinforce_memory(self, memory_type: str, memory_id: str, snapshot_id: str) -> int:
        """One more restatement, the snapshot merged into the evidence (once)."""
        collection = self._collection(memory_type)
        with self._errors(memory_type):
            changed = collection.update_one(
                {"id": memory_id, "evidence": {"$ne": snapshot_id}},
                {
                    "$inc": {"reinforcement_count": 1},
                    "$push": {"evidence": snapshot_id},
                    "$set": {"updated_at": now()},
                },
                session=self._session,
            ).modified_count
            version = collection.find_one({"id": memory_id}, {"version": 1}, session=self._session)
        if changed:
            self._on_undo(
                lambda: collection.update_one(
                    {"id": memory_id},
                    {"$inc": {"reinforcement_count": -1}, "$pull": {"evidence": snapshot_id}},
                )
            )
        return version["version"]

    def get_memory(self, memory_type: str, memory_id: str) -> dict[str, Any] | None:
        names = documents.MEMORY_FIELDS[memory_type]
        with self._errors(memory_type):
            found = self._collection(memory_type).find_one({"id": memory_id}, session=self._session)
        return None if found is None else {name: found.get(name) for name in names}

    def insert_audit(self, rows: Sequence[AuditRow]) -> None:
        if not rows:
            return
        audit = self.db["audit"]
        with self._errors("audit"):
            ids = audit.insert_many(
                [documents.audit_document(r) for r in rows], session=self._session
            ).inserted_ids
        self._on_undo(lambda: audit.delete_many({"_id": {"$in": ids}}))

    def audit_rows(
        self, run_id: str | None = None, since: str | None = None, until: str | None = None
    ) -> Iterator[AuditRow]:
        query: dict[str, Any] = {"run_id": run_id} if run_id else {}
        days = {op: day for op, day in (("$gte", since), ("$lte", until)) if day}
        if days:
            query["day"] = days
        with self._errors("audit"):
            for document in self.db["audit"].find(query).sort("_id", 1):
                yield documents.audit_row(document)

    def failure_counts(
        self, run_id: str | None = None, since: str | None = None, until: str | None = None
    ) -> dict[str, int]:
        query = {**({"run_id": run_id} if run_id else {}), **day_range(since, until)}
        counts = {"environmental": 0, "content": 0}
        with self._errors("failures"):
            for d in self.db["failures"].aggregate(
                [{"$match": query}, {"$group": {"_id": "$failure_class", "n": {"$sum": 1}}}]
            ):
                counts[d["_id"]] = d["n"]
        return counts
