"""The MongoDB store's provider batches."""

from __future__ import annotations

from typing import Any

from mempipe.adapters.store.mongo.base import MongoParts
from mempipe.schemas.batch import OPEN, ProviderBatch


class MongoProviderBatches(MongoParts):
    def record_batch(self, batch: ProviderBatch) -> None:
        document = batch.model_dump(mode="json", exclude={"key"})
        with self._errors("provider_batches"):
            self.db["provider_batches"].replace_one({"_id": batch.key}, document, upsert=True)

    def open_batches(self, job: str, scope: str) -> list[ProviderBatch]:
        return self._batches(
            {"job": job, "scope": scope, "status": {"$in": [s.value for s in OPEN]}}
        )

    def run_batches(self, run_id: str) -> list[ProviderBatch]:
        return self._batches({"run_id": run_id})

    def _batches(self, query: dict[str, Any]) -> list[ProviderBatch]:
        with self._errors("provider_batches"):
            found = self.db["provider_batches"].find(query).sort([("created_at", 1), ("_id", 1)])
            return [ProviderBatch(key=d.pop("_id"), **d) for d in found]
