"""The MongoDB store's leases: heartbeats, and named locks held by live runs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from pymongo.errors import DuplicateKeyError

from mempipe.adapters.store.mongo.base import MongoParts, now
from mempipe.schemas.run import RunStatus


class MongoLeases(MongoParts):
    """Named locks that end with their run."""

    def acquire_lease(self, name: str, run_id: str, lease: timedelta) -> str | None:
        at = now()
        with self._errors("leases"):
            running = self.db["runs"].distinct("_id", {"status": RunStatus.RUNNING.value})
            try:
                self.db["leases"].find_one_and_update(
                    {
                        "_id": name,
                        "$or": [
                            {"run_id": run_id},
                            {"until": {"$lte": at}},
                            {"run_id": {"$nin": running}},
                        ],
                    },
                    {
                        "$set": {"run_id": run_id, "until": at + lease},
                        "$setOnInsert": {"acquired_at": at},
                    },
                    upsert=True,
                )
            except DuplicateKeyError:
                holder = self.db["leases"].find_one({"_id": name}, {"run_id": 1})
                return holder["run_id"] if holder else None
        return None

    def release_leases(self, run_id: str, names: Sequence[str] | None = None) -> None:
        query: dict[str, Any] = {"run_id": run_id}
        if names is not None:
            query["_id"] = {"$in": list(names)}
        with self._errors("leases"):
            self.db["leases"].delete_many(query)

    def heartbeat(self, run_id: str, lease: timedelta) -> None:
        at = now()
        with self._errors("runs"):
            self.db["runs"].update_one(
                {"_id": run_id, "status": RunStatus.RUNNING.value},
                {"$set": {"heartbeat_at": at}},
            )
            self.db["leases"].update_many({"run_id": run_id}, {"$set": {"until": at + lease}})

    def lease_holders(self) -> dict[str, str]:
        with self._errors("leases"):
            return {d["_id"]: d["run_id"] for d in self.db["leases"].find().sort("_id", 1)}
