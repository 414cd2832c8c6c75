"""The MongoDB store's run log: each run's parameters, process, outcome and checkpoints."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pymongo import UpdateOne

from mempipe.adapters.store.mongo import documents
from mempipe.adapters.store.mongo.base import MongoParts, now
from mempipe.schemas.costs import SpendRow
from mempipe.schemas.run import RunRecord, RunStatus

SPEND_KEY = ("run_id", "day", "kind", "model", "memory_type", "via")


class MongoRunLog(MongoParts):
    """Runs as the store records them."""

    def start_run(self, run: RunRecord) -> None:
        document = documents.plain(run.model_dump())
        with self._errors("runs"):
            self.db["runs"].update_one(
                {"_id": run.run_id},
                {
                    "$set": {
                        k: document[k]
                        for k in (
                            "flow",
                            "status",
                            "parameters",
                            "started_at",
                            "host",
                            "pid",
                            "machine",
                            "heartbeat_at",
                        )
                    },
                    "$setOnInsert": {
                        k: document[k] for k in ("counts", "checkpoints", "error", "finished_at")
                    },
                },
                upsert=True,
            )

    def finish_run(
        self, run_id: str, status: RunStatus, counts: dict[str, int], error: str | None = None
    ) -> None:
        with self._errors("runs"):
            self.db["runs"].update_one(
                {"_id": run_id},
                {
                    "$set": {
                        "status": status.value,
                        "counts": counts,
                        "error": error,
                        "finished_at": now(),
                    }
                },
            )
            self.db["leases"].delete_many({"run_id": run_id})

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._errors("runs"):
            document = self.db["runs"].find_one({"_id": run_id})
        return None if document is None else self._run_from_document(document)

    def _run_from_document(self, document: dict[str, Any]) -> RunRecord:
        run_id = document.pop("_id")
        return RunRecord.model_validate({**document, "run_id": run_id})

    def list_runs(self, *, running_only: bool = False, limit: int = 50) -> list[RunRecord]:
        query = {"status": RunStatus.RUNNING.value} if running_only else {}
        with self._errors("runs"):
            documents = list(self.db["runs"].find(query).sort("started_at", -1).limit(limit))
        return [self._run_from_document(d) for d in documents]

    def set_checkpoint(self, run_id: str, name: str, value: Any) -> None:
        with self._errors("runs"):
            self.db["runs"].update_one(
                {"_id": run_id}, {"$set": {f"checkpoints.{documents.field_key(name)}": value}}
            )

    def resume_point(self, flow: str, name: str, run_id: str) -> Any | None:
        with self._errors("runs"):
            latest = self.db["runs"].find_one(
                {"flow": flow, "_id": {"$ne": run_id}}, sort=[("started_at", -1)]
            )
        if latest is None or latest["status"] == RunStatus.COMPLETED.value:
            return None
        return latest.get("checkpoints", {}).get(documents.field_key(name))

    def add_spend(self, rows: Sequence[SpendRow]) -> None:
        if not rows:
            return
        with self._errors("run_spend"):
            self.db["run_spend"].bulk_write(
                [
                    UpdateOne(
                        {"_id": "|".join(r.key)},
                        {
                            "$setOnInsert": dict(zip(SPEND_KEY, r.key, strict=True)),
                            "$inc": {
                                "requests": r.requests,
                                "input_tokens": r.input_tokens,
                                "output_tokens": r.output_tokens,
                                "unreported": r.unreported,
                            },
                        },
                        upsert=True,
                    )
                    for r in rows
                ],
                ordered=True,
            )

    def spend(
        self, run_id: str | None = None, since: str | None = None, until: str | None = None
    ) -> list[SpendRow]:
        query: dict[str, Any] = {"run_id": run_id} if run_id else {}
        days = {**({"$gte": since} if since else {}), **({"$lte": until} if until else {})}
        if days:
            query["day"] = days
        with self._errors("run_spend"):
            found = [
                SpendRow(**{k: v for k, v in d.items() if k != "_id"})
                for d in self.db["run_spend"].find(query)
            ]
        return sorted(found, key=lambda r: (r.day, *r.key))
