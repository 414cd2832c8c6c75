"""The MongoDB store's embedding side: blue/green model changes as a new vector field and a
new vector search index beside the serving ones; wait until queryable, switch, and drop the
old field and index on finalize (or the new ones on rollback)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pymongo import UpdateOne

from mempipe.adapters.store.mongo import documents, pipelines
from mempipe.adapters.store.mongo.base import REGISTRY, MongoParts, now
from mempipe.errors import StoreError
from mempipe.schemas.embedding import ModelState
from mempipe.schemas.search import STM

STAMP_BATCH = 1000
"""Records one stamping update covers: a bounded unit of work however large the collection."""


class MongoEmbeddingOps(MongoParts):
    def record_id_bounds(self, collection: str) -> tuple[int, int] | None:
        records = self._collection(collection)
        with self._errors(collection):
            low = records.find_one({}, {"_id": 1}, sort=[("_id", 1)])
            high = records.find_one({}, {"_id": 1}, sort=[("_id", -1)])
        return None if low is None or high is None else (low["_id"], high["_id"])

    def records_missing_vectors(
        self,
        collection: str,
        model_id: str,
        after_rowid: int,
        limit: int,
        until_rowid: int | None = None,
    ) -> list[tuple[int, str]]:
        """Records (every version, superseded included) without a vector of ``model_id``."""
        path = self._entry(collection, model_id)["path"]
        text = documents.text_field(collection)
        ids: dict[str, int] = {"$gt": after_rowid}
        if until_rowid is not None:
            ids["$lte"] = until_rowid
        with self._errors(collection):
            found = (
                self._collection(collection)
                .find({"_id": ids, path: {"$exists": False}}, {text: 1})
                .sort("_id", 1)
                .limit(limit)
            )
            return [(d["_id"], d[text]) for d in found]

    def store_vectors(
        self, collection: str, model_id: str, vectors: Sequence[tuple[int, list[float]]]
    ) -> int:
        """Write vectors into the model's field; a record that has one keeps it (a resumed run
        adds exactly what is missing)."""
        if not vectors:
            return 0
        path = self._entry(collection, model_id)["path"]
        stamp: dict[str, Any] = {}
        if collection != STM and self._serving_model(collection) == model_id:
            stamp = {"has_embedding": True, "embedding_model_id": model_id}
        requests = [
            UpdateOne({"_id": seq, path: {"$exists": False}}, {"$set": {path: list(v), **stamp}})
            for seq, v in vectors
        ]
        with self._errors(collection):
            return self._collection(collection).bulk_write(requests, ordered=False).modified_count

    def vector_counts(self, collection: str, model_id: str) -> tuple[int, int]:
        path = self._entry(collection, model_id)["path"]
        with self._errors(collection):
            records = self._collection(collection)
            return records.count_documents({}), records.count_documents({path: {"$exists": True}})

    def wait_searchable(self, collections: Sequence[str], model_id: str) -> None:
        """Each collection's index of ``model_id`` queryable, and caught up with the last
        record written: an exact search with that record's own vector finds it (mongot applies
        writes in order, so it has seen everything before it too). Bounded by the index
        timeout."""
        for collection in collections:
            entry = self._entry(collection, model_id)
            records = self._collection(collection)
            self.search_indexes.wait_queryable(records, entry["vector_table"])
            self._wait_caught_up(collection, entry)

    def _wait_caught_up(self, collection: str, entry: dict[str, Any]) -> None:
        records = self._collection(collection)
        path = entry["path"]
        with self._errors(collection):
            last = records.find_one({path: {"$exists": True}}, {path: 1}, sort=[("_id", -1)])
        if last is None:
            return
        stage = pipelines.vector_search_stage(
            entry["vector_table"], path, last[path], 10, {}, exact=True
        )

        def caught_up() -> bool:
            with self._errors(collection):
                found = records.aggregate([stage, {"$project": {"_id": 1}}])
                return last["_id"] in {d["_id"] for d in found}

        self.search_indexes.wait_until(
            caught_up,
            lambda: (
                f"{self.url}: the {collection} index {entry['vector_table']} has not caught "
                f"up with the last write after {self.search_indexes.timeout_s:g} s"
            ),
        )

    def switch_models(self, collections: Sequence[str], model_id: str) -> None:
        """Wait until every new index is queryable, then switch: the new model starts serving
        (search answers with it from here) before the old one is demoted, so there is never a
        moment without a serving model; in one small transaction (registry entries only) where the
        deployment has them. Each record's ``has_embedding`` / ``embedding_model_id`` then follow
        in a stamping pass of bounded batches outside any transaction (MongoDB aborts a
        transaction after 60 s and advises well under 1,000 modified documents in one): search
        does not read the stamp (it queries the serving model's own vector field), and the pass
        is idempotent, so a crash during it is finished by the next switch, rollback or
        finalize (:meth:`finish_stamping`)."""
        for collection in collections:
            entry = self._entry(collection, model_id)
            self.search_indexes.wait_queryable(self._collection(collection), entry["vector_table"])
        with self.write_transaction():
            for collection in collections:
                self._set_serving(collection, model_id, demote_to=ModelState.PREVIOUS)
        self.finish_stamping()

    def rollback_models(self, collections: Sequence[str]) -> list[str]:
        """Restore the previous model where one is kept; the newer vectors and index go, and
        so do the vectors of a move that never switched (a failed or abandoned re-embed)."""
        restored = []
        for collection in collections:
            previous = self._model_in(collection, ModelState.PREVIOUS)
            if previous is None:
                while (building := self._model_in(collection, ModelState.BUILDING)) is not None:
                    self._drop(collection, building)
                    restored.append(collection)
                continue
            current = self._serving_model(collection)
            with self.write_transaction():
                self._set_serving(collection, previous, demote_to=ModelState.BUILDING)
            self.finish_stamping()
            if current is not None:
                self._drop(collection, current)
            restored.append(collection)
        return restored

    def finalize_models(self, collections: Sequence[str]) -> list[str]:
        """Drop the vectors and index of previous models: a rollback is no longer possible."""
        self.finish_stamping()
        dropped = []
        for collection in collections:
            previous = self._model_in(collection, ModelState.PREVIOUS)
            if previous is not None:
                self._drop(collection, previous)
                dropped.append(f"{collection}:{previous}")
        return dropped

    def _serving_model(self, collection: str) -> str | None:
        active = self.active_embedding(collection)
        return None if active is None else active[0]

    def _model_in(self, collection: str, state: ModelState) -> str | None:
        with self._errors("registry"):
            entry = self.db[REGISTRY].find_one({"collection": collection, "state": state.value})
        return None if entry is None else entry["model_id"]

    def _set_serving(self, collection: str, model_id: str, demote_to: ModelState) -> None:
        entry = self._entry(collection, model_id)
        registry = self.db[REGISTRY]
        session = self._session
        with self._errors("registry"):
            current = self._serving_model(collection)
            registry.update_one(
                {"_id": entry["_id"]},
                {"$set": {"state": ModelState.SERVING.value, "serving_since": now()}},
                session=session,
            )
            if current is not None and current != model_id:
                registry.update_one(
                    {"_id": f"{collection}:{current}"},
                    {"$set": {"state": demote_to.value, "serving_since": None}},
                    session=session,
                )
            if collection != STM:
                registry.update_one(
                    {"_id": entry["_id"]}, {"$set": {"stamping": True}}, session=session
                )

    def finish_stamping(self) -> None:
        """Stamp the records of every collection whose serving model changed and whose stamping
        pass has not finished (this switch's, or one a crash interrupted)."""
        with self._errors("registry"):
            pending = list(
                self.db[REGISTRY].find({"stamping": True, "state": ModelState.SERVING.value})
            )
        for entry in pending:
            self._stamp(entry["collection"], entry["model_id"], entry["path"])
            with self._errors("registry"):
                self.db[REGISTRY].update_one({"_id": entry["_id"]}, {"$unset": {"stamping": ""}})

    def _stamp(self, collection: str, model_id: str, path: str) -> None:
        """Each record's ``has_embedding`` / ``embedding_model_id`` follow the serving model, in
        ``_id`` ranges of ``STAMP_BATCH``; each update touches only records still unstamped."""
        bounds = self.record_id_bounds(collection)
        if bounds is None:
            return
        records = self._collection(collection)
        low, high = bounds
        for start in range(low - 1, high, STAMP_BATCH):
            ids = {"$gt": start, "$lte": start + STAMP_BATCH}
            with self._errors(collection):
                records.update_many(
                    {"_id": ids, path: {"$exists": True}, "embedding_model_id": {"$ne": model_id}},
                    {"$set": {"has_embedding": True, "embedding_model_id": model_id}},
                )
                records.update_many(
                    {"_id": ids, path: {"$exists": False}, "has_embedding": {"$ne": False}},
                    {"$set": {"has_embedding": False, "embedding_model_id": None}},
                )

    def _drop(self, collection: str, model_id: str) -> None:
        entry = self._entry(collection, model_id)
        if entry["state"] == ModelState.SERVING.value:
            raise StoreError(f"{collection}: refusing to drop the serving model {model_id}")
        records = self._collection(collection)
        self.search_indexes.drop(records, entry["vector_table"])
        with self._errors(collection):
            records.update_many({entry["path"]: {"$exists": True}}, {"$unset": {entry["path"]: ""}})
            self.db[REGISTRY].delete_one({"_id": entry["_id"]})
