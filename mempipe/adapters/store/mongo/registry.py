"""The MongoDB store's registry role: which model serves each collection, and the blue/green moves
of :mod:`mempipe.domain.reembed` applied to the registry in one small transaction, records
stamped after it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from mempipe.adapters.store.mongo import pipelines
from mempipe.adapters.store.mongo.base import REGISTRY, MongoParts, now
from mempipe.domain.reembed import RegistryChange, finalize_plan, rollback_plan, switch_plan
from mempipe.schemas.embedding import Bridge, ModelState, RegistryEntry
from mempipe.schemas.search import STM

BRIDGES = "embedding_bridges"
"""One document per collection (``_id``: its name): its bridge, the map's weights as bytes."""
STAMP_BATCH = 1000
"""Records one stamping update covers: a bounded unit of work however large the collection."""


class MongoRegistry(MongoParts):
    """The embedding registry."""

    write_transaction: Callable[[], AbstractContextManager[None]]
    record_id_bounds: Callable[[str], tuple[int, int] | None]

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
                options=e.get("options"),
            )
            for e in entries
        ]

    def bridges(self) -> list[Bridge]:
        with self._errors("registry"):
            found = list(self.db[BRIDGES].find().sort("_id", 1))
        return [Bridge.model_validate({**b, "weights": bytes(b["weights"])}) for b in found]

    def keep_bridge(self, bridge: Bridge) -> None:
        """The collection's bridge, replacing the one it had."""
        document = {**bridge.model_dump(), "weights": bridge.weights}
        with self._errors("registry"):
            self.db[BRIDGES].replace_one({"_id": bridge.collection}, document, upsert=True)

    def active_embedding(self, collection: str) -> tuple[str, int] | None:
        """The serving model (the newest, should two ever be marked serving)."""
        with self._errors("registry"):
            entry = self.db[REGISTRY].find_one(
                {"collection": collection, "state": "serving"}, sort=[("serving_since", -1)]
            )
        return None if entry is None else (entry["model_id"], entry["dimensions"])

    def serving_model(self, collection: str) -> str | None:
        active = self.active_embedding(collection)
        return None if active is None else active[0]

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
        moment without a serving model; in one small transaction (registry entries only). Each
        record's ``has_embedding`` / ``embedding_model_id`` then follow in a stamping pass of
        bounded batches outside any transaction (MongoDB aborts a
        transaction after 60 s and advises well under 1,000 modified documents in one): search
        does not read the stamp (it queries the serving model's own vector field), and the pass
        is idempotent, so a crash during it is finished by the next switch, rollback or
        finalize (:meth:`finish_stamping`). A bridge into the model that stops serving is
        retired with it."""
        changes = [switch_plan(c, self._entries(c), model_id) for c in collections]
        for collection in collections:
            entry = self._entry(collection, model_id)
            self.search_indexes.wait_queryable(self._collection(collection), entry["vector_table"])
        with self.write_transaction():
            for change in changes:
                self._set_states(change)
            with self._errors("registry"):
                self.db[BRIDGES].delete_many(
                    {"_id": {"$in": list(collections)}, "serving_model": {"$ne": model_id}},
                    session=self._session,
                )
        self.finish_stamping()

    def rollback_models(self, collections: Sequence[str]) -> list[str]:
        """Restore the previous model where one is kept; the newer vectors and index go, and
        so do the vectors of a move that never switched (a failed or abandoned re-embed)."""
        restored = []
        for collection in collections:
            change = rollback_plan(collection, self._entries(collection))
            if change is None:
                continue
            if change.serve is not None:
                with self.write_transaction():
                    self._set_states(change)
                self.finish_stamping()
            for model_id in change.drop:
                self._drop(collection, model_id)
            restored.append(collection)
        return restored

    def finalize_models(self, collections: Sequence[str]) -> list[str]:
        """Drop the vectors and index of previous models: a rollback is no longer possible."""
        self.finish_stamping()
        dropped = []
        for collection in collections:
            change = finalize_plan(collection, self._entries(collection))
            for model_id in change.drop if change else ():
                self._drop(collection, model_id)
                dropped.append(f"{collection}:{model_id}")
        return dropped

    def _entries(self, collection: str) -> list[RegistryEntry]:
        return [e for e in self.registry() if e.collection == collection]

    def _set_states(self, change: RegistryChange) -> None:
        """Serve first, then demote: never a moment without a serving model."""
        registry = self.db[REGISTRY]
        session = self._session
        collection = change.collection
        with self._errors("registry"):
            if change.serve is not None:
                serving = {"state": ModelState.SERVING.value, "serving_since": now()}
                if collection != STM:
                    serving["stamping"] = True
                registry.update_one(
                    {"_id": f"{collection}:{change.serve}"}, {"$set": serving}, session=session
                )
            if change.demote_to is not None and change.demoted:
                registry.update_many(
                    {"_id": {"$in": [f"{collection}:{m}" for m in change.demoted]}},
                    {"$set": {"state": change.demote_to.value, "serving_since": None}},
                    session=session,
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
        records = self._collection(collection)
        self.search_indexes.drop(records, entry["vector_table"])
        with self._errors(collection):
            records.update_many({entry["path"]: {"$exists": True}}, {"$unset": {entry["path"]: ""}})
            self.db[REGISTRY].delete_one({"_id": entry["_id"]})
