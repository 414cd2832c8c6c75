"""The MongoDB store's work-queue role: which (snapshot, handler) extractions are runnable, what a
snapshot holds, and each extraction's state."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from mempipe.adapters.store.mongo import documents
from mempipe.adapters.store.mongo.base import MongoParts, now
from mempipe.errors import StoreError
from mempipe.schemas.snapshot import ExtractionState, ExtractionStatus
from mempipe.schemas.transcript import SnapshotContent, TurnLine
from mempipe.schemas.work import Stale, WorkItem, WorkQuery

RUNNABLE = [ExtractionStatus.PENDING.value, ExtractionStatus.FAILED_RETRYABLE.value]
WORK_ORDER = [("order_at", 1), ("session_id", 1), ("first_turn_seq", 1)]


def is_work(state: dict[str, Any], handler: str, stale: Stale | None) -> bool:
    """Runnable, or (with ``stale``) done with another extraction than the handler's current."""
    if state["status"] in RUNNABLE:
        return True
    current = (stale or {}).get(handler)
    return current is not None and current.stale(
        state["status"], state.get("extractor"), state.get("prompt_version")
    )


class MongoWorkQueue(MongoParts):
    """Snapshots as extraction work."""

    def extraction_work(self, query: WorkQuery) -> list[WorkItem]:
        if not query.handlers:
            return []
        match = documents.selection_query(query.selection)
        snapshots = self.db["snapshots"]
        with self._errors("snapshots"):
            for handler in query.handlers:
                snapshots.update_many(
                    {**match, f"extraction.{handler}": {"$exists": False}},
                    {
                        "$set": {
                            f"extraction.{handler}": self._state(ExtractionState(handler=handler))
                        }
                    },
                )
            wanted = [
                {f"extraction.{h}": {"$exists": True}}
                if query.force or (query.stale and h in query.stale)
                else {f"extraction.{h}.status": {"$in": RUNNABLE}}
                for h in query.handlers
            ]
            cursor = snapshots.find(
                {"$and": [match, {"$or": wanted}]},
                {"org_id": 1, "project_id": 1, "user_id": 1, "extraction": 1, "forgotten": 1},
            ).sort(WORK_ORDER)
            return [
                WorkItem(
                    snapshot_id=d["_id"],
                    handler=h,
                    attempts=d["extraction"][h]["attempts"],
                    org_id=d["org_id"],
                    project_id=d["project_id"],
                    user_id=d.get("user_id"),
                )
                for d in cursor
                for h in sorted(query.handlers)
                if h in d["extraction"]
                and not {h, "*"} & set(d.get("forgotten") or ())
                and (query.force or is_work(d["extraction"][h], h, query.stale))
            ]

    @staticmethod
    def _state(state: ExtractionState) -> dict[str, Any]:
        return {**state.model_dump(mode="json", exclude={"handler"}), "updated_at": now()}

    def snapshot_times(self, snapshot_ids: Sequence[str]) -> dict[str, datetime]:
        with self._errors("snapshots"):
            found = self.db["snapshots"].find({"_id": {"$in": list(snapshot_ids)}}, {"order_at": 1})
            return {d["_id"]: d["order_at"] for d in found if d.get("order_at") is not None}

    def snapshot_content(self, snapshot_id: str) -> SnapshotContent:
        with self._errors("snapshots"):
            head = self.db["snapshots"].find_one({"_id": snapshot_id})
            if head is None:
                raise StoreError(f"no snapshot {snapshot_id!r}")
            turns = (
                self.db["turns"]
                .find(
                    {
                        "org_id": head["org_id"],
                        "project_id": head["project_id"],
                        "user_id": head.get("user_id"),
                        "session_id": head["session_id"],
                        "turn_seq": {"$gte": head["first_turn_seq"], "$lte": head["last_turn_seq"]},
                    },
                    {"role": 1, "content": 1, "created_at": 1},
                )
                .sort("turn_seq", 1)
            )
            lines = [
                TurnLine(role=t["role"], content=t["content"], created_at=t.get("created_at"))
                for t in turns
            ]
        return SnapshotContent(
            snapshot_id=snapshot_id,
            org_id=head["org_id"],
            project_id=head["project_id"],
            user_id=head.get("user_id"),
            agent_id=head.get("agent_id"),
            session_id=head["session_id"],
            turns=lines,
        )

    def rule_summarized(self, snapshot_ids: Sequence[str]) -> list[str]:
        with self._errors("snapshots"):
            return [
                d["_id"]
                for d in self.db["snapshots"].find(
                    {"_id": {"$in": list(snapshot_ids)}, "summary_source": "rules"}, {"_id": 1}
                )
            ]

    def set_snapshot_summary(self, snapshot_id: str, summary: str, source: str) -> None:
        with self._errors("snapshots"):
            self.db["snapshots"].update_one(
                {"_id": snapshot_id},
                {"$set": {"summary": summary, "summary_source": source}},
                session=self._session,
            )

    def set_extraction_state(self, snapshot_id: str, state: ExtractionState) -> None:
        field = f"extraction.{state.handler}"
        with self._errors("snapshots"):
            self.db["snapshots"].update_one(
                {"_id": snapshot_id},
                {"$set": {field: self._state(state)}},
                session=self._session,
            )
