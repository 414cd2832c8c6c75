"""The MongoDB store's transfer role: every record of a collection, as its model, read in pages
for a bundle (every memory version, snapshots with their extraction states)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bson import ObjectId
from pydantic import BaseModel

from mempipe.adapters.store.mongo import documents
from mempipe.adapters.store.mongo.base import MongoParts
from mempipe.domain.ids import turn_key_of, turn_ref
from mempipe.schemas.bundle import (
    BUNDLE_MODELS,
    MEMORY_COLLECTIONS,
    BundleSelection,
    store_collection,
)
from mempipe.schemas.run import RunRecord
from mempipe.schemas.snapshot import ExtractionState, Snapshot
from mempipe.schemas.turn import TURN_FIELDS, TURN_KEY, Turn

COLLECTIONS = {"turns": documents.TURNS, "snapshots": "snapshots"}
GENERATED_IDS = ("audit", "failures")
"""Collections whose documents have MongoDB's own ObjectIds: their cursor travels as text."""


class MongoTransfer(MongoParts):
    """Reads for export and copy."""

    def export_page(
        self, collection: str, selection: BundleSelection, after: Any, limit: int
    ) -> tuple[list[BaseModel], Any]:
        """Up to ``limit`` records after the cursor ``after`` (None: from the start), and the
        cursor to pass next."""
        query = self._selected(collection, selection)
        if after is not None:
            query["_id"] = {"$gt": ObjectId(after) if collection in GENERATED_IDS else after}
        name = COLLECTIONS.get(collection, collection)
        with self._errors(name):
            found = list(self.db[name].find(query).sort("_id", 1).limit(limit))
        records = [_record(collection, d) for d in found]
        if not found:
            return records, after
        last = found[-1]["_id"]
        return records, str(last) if collection in GENERATED_IDS else last

    def export_vectors(
        self, collection: str, model_id: str, selection: BundleSelection, after: Any, limit: int
    ) -> tuple[list[tuple[str, list[float]]], Any]:
        """The vectors of ``model_id`` of a bundle collection's records, by record reference
        (a memory's id, a turn's key), in pages."""
        stored = store_collection(collection)
        path = self._entry(stored, model_id)["path"]
        query = {k: v for k, v in selection.model_dump().items() if v is not None}
        if after is not None:
            query["_id"] = {"$gt": after}
        with self._errors(collection):
            found = list(
                self._collection(stored)
                .find(query, {path: 1, "id": 1, **dict.fromkeys(TURN_KEY, 1)})
                .sort("_id", 1)
                .limit(limit)
            )
        vectors = [(_ref(collection, d), list(d[path])) for d in found if d.get(path) is not None]
        return vectors, found[-1]["_id"] if len(found) == limit else None

    def record_rowids(self, collection: str, refs: Sequence[str]) -> dict[str, int]:
        """The store's own record ids of records named by reference (those it holds)."""
        stored = store_collection(collection)
        found: dict[str, int] = {}
        with self._errors(collection):
            for ref in refs:
                if collection == "turns":
                    query = dict(zip(TURN_KEY, turn_key_of(ref), strict=True))
                    query["user_id"] = query["user_id"] or None
                else:
                    query = {"id": ref}
                document = self._collection(stored).find_one(query, {"_id": 1})
                if document is not None:
                    found[ref] = document["_id"]
        return found

    def add_runs(self, runs: Sequence[RunRecord]) -> set[str]:
        """Runs as they were recorded elsewhere; a run id already here is left alone."""
        added: set[str] = set()
        with self._errors("runs"):
            for run in runs:
                document = documents.plain(run.model_dump(exclude={"run_id"}))
                outcome = self.db["runs"].update_one(
                    {"_id": run.run_id}, {"$setOnInsert": document}, upsert=True
                )
                if outcome.upserted_id is not None:
                    added.add(run.run_id)
        return added

    def _selected(self, collection: str, selection: BundleSelection) -> dict[str, Any]:
        """Audit rows by their identity; failures by their org and project, and by the user's
        snapshots; runs by what the selected audit rows and failures name."""
        identity = {k: v for k, v in selection.model_dump().items() if v is not None}
        if collection in ("turns", "snapshots", "audit", *MEMORY_COLLECTIONS):
            return identity
        org = {k: v for k, v in identity.items() if k != "user_id"}
        if selection.user_id is not None:
            snapshots = self.db["snapshots"].distinct("_id", identity)
            org["snapshot_id"] = {"$in": snapshots}
        if collection == "failures":
            return org
        if not identity:
            return {}
        runs = {*self.db["audit"].distinct("run_id", identity)}
        runs |= {*self.db["failures"].distinct("run_id", org)}
        return {"_id": {"$in": sorted(runs)}}


def _ref(collection: str, d: dict[str, Any]) -> str:
    if collection == "turns":
        return turn_ref(*(d.get(k) for k in TURN_KEY))
    return d["id"]


def _record(collection: str, d: dict[str, Any]) -> BaseModel:
    model = BUNDLE_MODELS[collection]
    if collection == "turns":
        fields = {f: d.get(f) for f in TURN_FIELDS if d.get(f) is not None}
        return Turn.model_validate(
            {**fields, "snapshot_id": d.get("snapshot_id"), "source": d["source"]}
        )
    if collection == "snapshots":
        names = [f for f in Snapshot.model_fields if f not in ("snapshot_id", "extraction")]
        states = [
            ExtractionState(handler=handler, **{k: v for k, v in s.items() if k != "updated_at"})
            for handler, s in sorted((d.get("extraction") or {}).items())
        ]
        return Snapshot(snapshot_id=d["_id"], **{f: d.get(f) for f in names}, extraction=states)
    if collection == "runs":
        return model.model_validate(
            {k: v for k, v in d.items() if k != "_id"} | {"run_id": d["_id"]}
        )
    fields = {f: d[f] for f in model.model_fields if d.get(f) is not None}
    return model.model_validate(fields)
