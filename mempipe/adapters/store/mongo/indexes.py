"""The MongoDB store's index-admin role: write-once declarations, and the search indexes checked
against them and rebuilt."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mempipe.adapters.store.mongo import pipelines
from mempipe.adapters.store.mongo.base import MongoParts, now
from mempipe.domain.declarations import check_declarations, declared_definitions
from mempipe.schemas.config import CustomTypeConfig
from mempipe.schemas.embedding import COLLECTIONS, RegistryEntry
from mempipe.schemas.indexes import UNQUANTIZED, IndexState, IndexStatus, Quantization

TEXT_KIND = "search"
VECTOR_KIND = "vectorSearch"


def vector_differences(actual: dict[str, Any], declared: dict[str, Any]) -> list[str]:
    differences = []
    have, want = pipelines.vector_field(actual), pipelines.vector_field(declared)
    for name in ("path", "numDimensions", "similarity"):
        if have.get(name) != want[name]:
            differences.append(f"{name} {have.get(name)}, declared {want[name]}")
    quantization = have.get("quantization", Quantization.NONE.value)
    if quantization != want.get("quantization", Quantization.NONE.value):
        differences.append(
            f"quantization {quantization}, declared {want.get('quantization', 'none')}"
        )
    differences.extend(
        filter_differences(pipelines.declared_filters(actual), pipelines.declared_filters(declared))
    )
    return differences


def filter_differences(actual: Sequence[str], declared: Sequence[str]) -> list[str]:
    missing = [p for p in declared if p not in actual]
    extra = [p for p in actual if p not in declared]
    return [
        *([f"filter fields missing: {', '.join(missing)}"] if missing else []),
        *([f"filter fields not declared: {', '.join(extra)}"] if extra else []),
    ]


class MongoIndexAdmin(MongoParts):
    """Declarations and index health."""

    registry: Callable[[], list[RegistryEntry]]

    def load_declarations(self) -> None:
        with self._errors("declarations"):
            declared = list(self.db["declarations"].find().sort("name", 1))
        self.partition_keys = tuple(d["name"] for d in declared if d["kind"] == "partition_key")
        self.custom_types = tuple(d["name"] for d in declared if d["kind"] == "custom_type")
        with self._errors("vector_index_settings"):
            settings = list(self.db["vector_index_settings"].find())
        self.quantization = {
            **UNQUANTIZED,
            **{s["_id"]: Quantization(s["quantization"]) for s in settings},
        }

    def declare_quantization(self, declared: Mapping[str, Quantization]) -> None:
        """Record each collection's quantization as the configuration declares it now (a
        change leaves its vector indexes drifted until rebuilt on purpose)."""
        changed = {c: q for c, q in declared.items() if self.quantization[c] is not q}
        if changed:
            with self._errors("vector_index_settings"):
                for collection, quantization in changed.items():
                    self.db["vector_index_settings"].replace_one(
                        {"_id": collection},
                        {"quantization": quantization.value, "declared_at": now()},
                        upsert=True,
                    )
            self.load_declarations()

    def declare(
        self, partition_keys: Sequence[str], custom_types: Sequence[CustomTypeConfig]
    ) -> list[tuple[str, str]]:
        """Record what the configuration declares; refuse removals and changes (write-once).
        An added partition key leaves the search indexes drifted until rebuilt on purpose."""
        with self._errors("declarations"):
            recorded = {
                (d["kind"], d["name"]): d["definition"] for d in self.db["declarations"].find()
            }
        declared = declared_definitions(partition_keys, custom_types)
        added = check_declarations(recorded, declared)
        if added:
            with self._errors("declarations"):
                self.db["declarations"].insert_many(
                    [
                        {
                            "_id": f"{kind}:{name}",
                            "kind": kind,
                            "name": name,
                            "definition": declared[(kind, name)],
                            "declared_at": now(),
                        }
                        for kind, name in added
                    ]
                )
        self.load_declarations()
        return added

    def index_status(self) -> list[IndexStatus]:
        if not self.capabilities.search:
            return self._pending()
        statuses = [self._text_status(c) for c in COLLECTIONS]
        statuses.extend(self._vector_status(entry) for entry in self.registry())
        return statuses

    def _pending(self) -> list[IndexStatus]:
        """Every declared index, waiting for a server with search: `rebuild-indexes` creates
        them there."""
        why = ["this server has no search (Atlas, or mongot for MongoDB 8.2+)"]
        statuses = [
            IndexStatus(
                collection=c,
                kind="text",
                name=pipelines.TEXT_INDEX,
                state=IndexState.PENDING,
                differences=why,
            )
            for c in COLLECTIONS
        ]
        statuses.extend(
            IndexStatus.of_vectors(entry).model_copy(
                update={"state": IndexState.PENDING, "differences": why}
            )
            for entry in self.registry()
        )
        return statuses

    def rebuild_indexes(self, force: bool) -> list[IndexStatus]:
        """Create absent indexes; update drifted ones when ``force`` (a dimension change needs
        a re-embed and is only reported); wait until each one touched is queryable."""
        if not self.capabilities.search:
            return self.index_status()  # all pending: nothing can be created here
        results = []
        for status in self.index_status():
            repaired = self._repair(status, force)
            if repaired.state in (IndexState.CREATED, IndexState.REBUILT):
                self.search_indexes.wait_queryable(self._collection(status.collection), status.name)
            results.append(repaired)
        return results

    def create_text_indexes(self) -> None:
        """An Atlas Search index over each collection's text and filter fields, where absent
        (pending on a server without search)."""
        if not self.capabilities.search:
            return
        for collection in COLLECTIONS:
            self.search_indexes.ensure(
                self._collection(collection),
                pipelines.TEXT_INDEX,
                TEXT_KIND,
                pipelines.text_index_definition(collection, self.partition_keys),
            )

    def _text_status(self, collection: str) -> IndexStatus:
        actual = self.search_indexes.definition(self._collection(collection), pipelines.TEXT_INDEX)
        status = IndexStatus(
            collection=collection, kind="text", name=pipelines.TEXT_INDEX, state=IndexState.OK
        )
        if actual is None:
            return status.model_copy(update={"state": IndexState.ABSENT})
        declared = pipelines.text_index_definition(collection, self.partition_keys)
        status.differences = filter_differences(
            pipelines.token_paths(actual), pipelines.token_paths(declared)
        )
        analysed, wanted = pipelines.analysed_fields(actual), pipelines.analysed_fields(declared)
        if analysed != wanted:
            status.differences.append(f"text fields {analysed}, declared {wanted}")
        if status.differences:
            status.state = IndexState.DRIFT
        return status

    def _vector_status(self, entry: RegistryEntry) -> IndexStatus:
        status = IndexStatus.of_vectors(entry)
        actual = self.search_indexes.definition(
            self._collection(entry.collection), entry.vector_table
        )
        if actual is None:
            return status.model_copy(update={"state": IndexState.ABSENT})
        status.differences = vector_differences(actual, self._declared_vector(entry))
        if status.differences:
            status.state = IndexState.DRIFT
        return status

    def _declared_vector(self, entry: RegistryEntry) -> dict[str, Any]:
        path = self._entry(entry.collection, entry.model_id)["path"]
        return pipelines.vector_index_definition(
            entry.collection,
            path,
            entry.dimensions,
            self.partition_keys,
            self.quantization[entry.collection],
        )

    def _repair(self, status: IndexStatus, force: bool) -> IndexStatus:
        records = self._collection(status.collection)
        if status.kind == "text":
            declared = pipelines.text_index_definition(status.collection, self.partition_keys)
            kind = TEXT_KIND
        else:
            entry = next(
                e
                for e in self.registry()
                if e.vector_table == status.name and e.collection == status.collection
            )
            declared = self._declared_vector(entry)
            kind = VECTOR_KIND
        if status.state is IndexState.ABSENT:
            self.search_indexes.create(records, status.name, kind, declared)
            return status.model_copy(update={"state": IndexState.CREATED})
        if status.state is not IndexState.DRIFT or not force:
            return status
        if any(d.startswith("numDimensions") for d in status.differences):
            return status
        self.search_indexes.update(records, status.name, declared)
        return status.model_copy(update={"state": IndexState.REBUILT})
