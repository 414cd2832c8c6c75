"""The MongoDB store's vectors role: one vector field and search index per (collection, model),
written beside the records."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any

from pymongo import UpdateOne
from pymongo.errors import DuplicateKeyError

from mempipe.adapters.store.mongo import documents, pipelines
from mempipe.adapters.store.mongo.base import REGISTRY, MongoParts, now
from mempipe.domain.declarations import column_for
from mempipe.domain.partition_keys import METADATA_PREFIX
from mempipe.errors import StoreError
from mempipe.schemas.embedding import ModelRegistration, ModelState
from mempipe.schemas.reembed import SampledRecord
from mempipe.schemas.search import STM

EMBEDDED_FIELDS = dict.fromkeys(("text", "content", "name"), 1)
"""What ``documents.embedded_text`` reads of a record."""


class MongoVectors(MongoParts):
    """Vector fields and the records they lack."""

    serving_model: Callable[[str], str | None]

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
        if serving:
            name = serving["vector_table"]
        else:
            name = self.register_model(
                ModelRegistration(
                    collection=memory_type,
                    model_id=model_id,
                    dimensions=dimensions,
                    state="serving",
                )
            )
        if (memory_type, name) not in self._queryable and self.capabilities.search:
            # Reconciliation searches this index at once: one just created is still building.
            self.search_indexes.wait_queryable(self._collection(memory_type), name)
            self._queryable.add((memory_type, name))
        return name

    def register_model(self, registration: ModelRegistration) -> str:
        """Register (collection, model) with its own vector field and create its vector search
        index beside the others (not waited for here: writes do not need it; the switch does)."""
        registry = self.db[REGISTRY]
        with self._errors("registry"):
            registered = registry.find_one(
                {"_id": f"{registration.collection}:{registration.model_id}"}
            )
            first = registry.count_documents({"collection": registration.collection}) == 0
        if registered and registered["dimensions"] != registration.dimensions:
            raise StoreError(
                f"{registration.collection}: model {registration.model_id} is registered with "
                f"{registered['dimensions']} dimensions, not {registration.dimensions}"
            )
        if registered:
            return registered["vector_table"]
        name = pipelines.vector_index_name(registration.model_id)
        path = pipelines.vector_path(registration.model_id, first)
        if self.capabilities.search:  # else pending: `rebuild-indexes` creates it later
            self.search_indexes.ensure(
                self._collection(registration.collection),
                name,
                "vectorSearch",
                pipelines.vector_index_definition(
                    registration.collection,
                    path,
                    registration.dimensions,
                    self.partition_keys,
                    self.quantization[registration.collection],
                ),
            )
        # Workers of one run may register the same model at once: one document wins.
        with self._errors("registry"), suppress(DuplicateKeyError):
            registry.insert_one(
                {
                    "_id": f"{registration.collection}:{registration.model_id}",
                    "collection": registration.collection,
                    "model_id": registration.model_id,
                    "dimensions": registration.dimensions,
                    "vector_table": name,
                    "path": path,
                    "state": registration.state.value,
                    "created_at": now(),
                    "serving_since": now() if registration.state is ModelState.SERVING else None,
                    "options": None
                    if registration.options is None
                    else registration.options.model_dump(),
                }
            )
        return name

    def vector_columns(self, collection: str, model_id: str) -> tuple[str, ...]:
        """The filter fields the vector index serves now (from the server's serving definition,
        not the configuration nor the latest accepted one), named as the search service checks
        them."""
        entry = self._entry(collection, model_id)
        definition = (
            self.search_indexes.serving(self._collection(collection), entry["vector_table"]) or {}
        )
        return tuple(
            column_for(p.removeprefix(METADATA_PREFIX)) if p.startswith(METADATA_PREFIX) else p
            for p in pipelines.declared_filters(definition)
        )

    def record_id_bounds(self, collection: str) -> tuple[int, int] | None:
        records = self._collection(collection)
        with self._errors(collection):
            low = records.find_one({}, {"_id": 1}, sort=[("_id", 1)])
            high = records.find_one({}, {"_id": 1}, sort=[("_id", -1)])
        return None if low is None or high is None else (low["_id"], high["_id"])

    def records_missing_vectors(
        self, collection: str, model_id: str, after_id: int, limit: int, until_id: int | None = None
    ) -> list[tuple[int, str]]:
        """Records (every version, superseded included) without a vector of ``model_id``:
        every record, for a model not registered yet."""
        with self._errors("registry"):
            entry = self.db[REGISTRY].find_one({"_id": f"{collection}:{model_id}"})
        ids: dict[str, int] = {"$gt": after_id}
        if until_id is not None:
            ids["$lte"] = until_id
        query: dict[str, Any] = {"_id": ids}
        if entry is not None:
            query[entry["path"]] = {"$exists": False}
        with self._errors(collection):
            found = (
                self._collection(collection)
                .find(
                    query,
                    dict.fromkeys(("text", "content", "name"), 1),
                )
                .sort("_id", 1)
                .limit(limit)
            )
            return [(d["_id"], documents.embedded_text(collection, d)) for d in found]

    def set_vectors(
        self, collection: str, model_id: str, vectors: Sequence[tuple[int, list[float]]]
    ) -> int:
        """Write vectors into the model's field; a record that has one keeps it (a resumed run
        adds exactly what is missing)."""
        if not vectors:
            return 0
        path = self._entry(collection, model_id)["path"]
        stamp: dict[str, Any] = {}
        if collection != STM and self.serving_model(collection) == model_id:
            stamp = {"has_embedding": True, "embedding_model_id": model_id}
        requests = [
            UpdateOne({"_id": seq, path: {"$exists": False}}, {"$set": {path: list(v), **stamp}})
            for seq, v in vectors
        ]
        with self._errors(collection):
            return self._collection(collection).bulk_write(requests, ordered=False).modified_count

    def record_refs(
        self, collection: str, after_id: int, limit: int
    ) -> list[tuple[int, str, str | None]]:
        fields = dict.fromkeys(("id", "session_id", "turn_seq", "message_id"), 1)
        with self._errors(collection):
            found = (
                self._collection(collection)
                .find({"_id": {"$gt": after_id}}, fields)
                .sort("_id", 1)
                .limit(limit)
            )
            return [(d["_id"], *_hit_ids(collection, d)) for d in found]

    def sampled_records(
        self, collection: str, model_id: str | None, rowids: Sequence[int]
    ) -> list[SampledRecord]:
        with self._errors("registry"):
            entry = self.db[REGISTRY].find_one({"_id": f"{collection}:{model_id}"})
        path = entry["path"] if entry is not None else None
        fields = {**documents.HIT_FIELDS, **EMBEDDED_FIELDS, "status": 1, "session_id": 1}
        with self._errors(collection):
            found = self._collection(collection).find(
                {"_id": {"$in": list(rowids)}}, {**fields, **({path: 1} if path else {})}
            )
            return [
                SampledRecord(
                    rowid=d["_id"],
                    hit=documents.hit(collection, d, 0.0),
                    text=documents.embedded_text(collection, d),
                    searchable=collection == STM or d.get("status") == "active",
                    vector=list(d[path]) if path and d.get(path) is not None else None,
                )
                for d in found
            ]

    def vector_counts(self, collection: str, model_id: str) -> tuple[int, int]:
        path = self._entry(collection, model_id)["path"]
        with self._errors(collection):
            records = self._collection(collection)
            return records.count_documents({}), records.count_documents({path: {"$exists": True}})


def _hit_ids(collection: str, document: dict[str, Any]) -> tuple[str, str | None]:
    """The id a search hit gives a record, and a turn's message id."""
    if collection == STM:
        return f"{document['session_id']}#{document['turn_seq']}", document.get("message_id")
    return document["id"], None
