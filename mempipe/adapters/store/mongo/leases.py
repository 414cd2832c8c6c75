"""The MongoDB store's run liveness: heartbeats, and leases (named locks) held by live runs.

A lease is one document per name; taking it is one ``find_one_and_update`` with upsert whose
condition (free, expired, ours, or its run no longer running) holds at the moment of the write:
when it does not, the upsert collides with the existing ``_id`` and the lease stays its holder's.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from pymongo.errors import DuplicateKeyError

from mempipe.adapters.store.mongo.base import MongoParts, now
from mempipe.schemas.run import RunRecord, RunStatus


class MongoLeaseOps(MongoParts):
    def _run_from_document(self, document: dict[str, Any]) -> RunRecord:
        raise NotImplementedError

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

    def list_runs(self, *, running_only: bool = False, limit: int = 50) -> list[RunRecord]:
        query = {"status": RunStatus.RUNNING.value} if running_only else {}
        with self._errors("runs"):
            documents = list(self.db["runs"].find(query).sort("started_at", -1).limit(limit))
        return [self._run_from_document(d) for d in documents]
