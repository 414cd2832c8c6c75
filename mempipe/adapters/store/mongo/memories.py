"""The MongoDB store's memories role: long-term memories, their reconciliation candidates and
version changes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
from pymongo import ReturnDocument
from pymongo.collection import Collection

from mempipe.adapters.store.mongo import documents, pipelines
from mempipe.adapters.store.mongo.base import MongoParts, now
from mempipe.adapters.store.mongo.fence import withdraw_fenced
from mempipe.domain.reconcile import Candidate
from mempipe.domain.vectors import cosine_scores, cosine_similarity
from mempipe.errors import StoreError
from mempipe.schemas.identity import Visibility
from mempipe.schemas.memory import KEY_FIELDS, MemoryRecord
from mempipe.schemas.search import CandidateQuery, Near


class MongoMemories(MongoParts):
    """Long-term memory records; written inside the caller's write transaction."""

    def memory_candidates(self, asked: CandidateQuery) -> list[Candidate]:
        """By exact key inside the transaction; by nearest vector through an exact
        ``$vectorSearch`` with the scope inside the stage; and, because a search index sees
        writes only after its sync delay (it is not transactional), the records of the scope
        written within ``sync_window_s`` are compared here directly, so two restatements a
        moment apart still meet."""
        collection = self._collection(asked.memory_type)
        key_field = KEY_FIELDS.get(asked.memory_type)
        query = documents.scope_query(asked.scope, asked.memory_type)
        found: dict[str, Candidate] = {}
        fields = {"id": 1, "text": 1, "evidence": 1, **({key_field: 1} if key_field else {})}
        with self._errors(asked.memory_type):
            if asked.key is not None and key_field is not None:
                for d in collection.find(
                    {**query, key_field: asked.key}, fields, session=self._session
                ):
                    found[d["id"]] = _candidate(d, key_field, None)
            if asked.taught_by is not None:
                taught = {**query, "evidence": asked.taught_by}
                for d in collection.find(taught, fields, session=self._session):
                    found.setdefault(d["id"], _candidate(d, key_field, None))
            if asked.near is not None and not self.capabilities.search:
                entry = self._entry(asked.memory_type, asked.near.model_id)
                for candidate in self._nearest_by_scan(
                    collection, query, fields, entry, asked.near, asked.k
                ):
                    found.setdefault(candidate.memory_id, candidate)
            elif asked.near is not None:
                entry = self._entry(asked.memory_type, asked.near.model_id)
                stages = [
                    pipelines.vector_search_stage(
                        entry["vector_table"],
                        entry["path"],
                        asked.near.vector,
                        asked.k,
                        query,
                        exact=True,
                    ),
                    {"$project": {**fields, "score": {"$meta": "vectorSearchScore"}}},
                ]
                for d in collection.aggregate(stages):
                    found[d["id"]] = _candidate(d, key_field, pipelines.cosine(d["score"]))
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
                    similarity = cosine_similarity(asked.near.vector, d[entry["path"]])
                    found.setdefault(d["id"], _candidate(d, key_field, similarity))
        return list(found.values())

    def _nearest_by_scan(
        self,
        collection: Collection,
        query: dict[str, Any],
        fields: dict[str, int],
        entry: dict[str, Any],
        near: Near,
        k: int,
    ) -> list[Candidate]:
        """The k nearest of the scope by an exact cosine over its vectors, read here: what an
        exact ``$vectorSearch`` would answer, for a server without vector search. The scope is
        one owner's memories of one type, which are few; more than
        ``exact_scan_limit`` is refused rather than scanned."""
        limit = self.config.exact_scan_limit
        scoped = {**query, entry["path"]: {"$exists": True}}
        projection = {**fields, entry["path"]: 1}
        docs = list(collection.find(scoped, projection, session=self._session).limit(limit + 1))
        if len(docs) > limit:
            raise StoreError(
                f"{self.url}: more than {limit} {collection.name} memories in one owner's scope "
                "to compare by exact scan (MEMPIPE_MONGODB_EXACT_SCAN_LIMIT); a server with "
                "vector search (Atlas, or mongot for MongoDB 8.2+) has no such limit"
            )
        if not docs:
            return []
        key_field = KEY_FIELDS.get(collection.name)
        scores = cosine_scores(near.vector, [d[entry["path"]] for d in docs])
        ranked = [(scores[i], int(i)) for i in np.argsort(-scores, kind="stable")[:k]]
        return [_candidate(docs[i], key_field, float(score)) for score, i in ranked]

    def add_memory(
        self, memory_type: str, record: MemoryRecord, vector: list[float] | None
    ) -> bool:
        (seq,) = self._next_ids(memory_type, 1)
        document = documents.memory_document(seq, record)
        if vector is not None and record.embedding_model_id is not None:
            document[self._entry(memory_type, record.embedding_model_id)["path"]] = list(vector)
        collection = self._collection(memory_type)
        with self._errors(memory_type):
            collection.insert_one(document, session=self._session)
            if record.visibility is Visibility.PRIVATE and withdraw_fenced(
                self.db, collection.name, [document], self._session
            ):
                return False
        return True

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
        return before["version"]

    def reinforce_memory(self, memory_type: str, memory_id: str, snapshot_id: str) -> int:
        """One more restatement, the snapshot merged into the evidence (once)."""
        collection = self._collection(memory_type)
        with self._errors(memory_type):
            collection.update_one(
                {"id": memory_id, "evidence": {"$ne": snapshot_id}},
                {
                    "$inc": {"reinforcement_count": 1},
                    "$push": {"evidence": snapshot_id},
                    "$set": {"updated_at": now()},
                },
                session=self._session,
            )
            version = collection.find_one({"id": memory_id}, {"version": 1}, session=self._session)
        return version["version"]

    def get_memory(self, memory_type: str, memory_id: str) -> dict[str, Any] | None:
        names = documents.MEMORY_FIELDS[memory_type]
        with self._errors(memory_type):
            found = self._collection(memory_type).find_one({"id": memory_id}, session=self._session)
        return None if found is None else {name: found.get(name) for name in names}


def _candidate(document: dict, key_field: str | None, similarity: float | None) -> Candidate:
    """A memory document as reconciliation compares it."""
    return Candidate(
        document["id"],
        document.get(key_field) if key_field else None,
        document["text"],
        similarity,
        tuple(document.get("evidence") or ()),
    )
