"""The MongoDB store's audit-log role: every ADD / UPDATE / REINFORCE, and every failure."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from mempipe.adapters.store.mongo import documents
from mempipe.adapters.store.mongo.base import MongoParts
from mempipe.adapters.store.mongo.fence import withdraw_fenced
from mempipe.schemas.audit import EVERY_ROW, AuditRow, AuditSelection, AuditTime
from mempipe.schemas.failure import Failure


def day_range(since: str | None, until: str | None) -> dict[str, Any]:
    """``at`` within the days ``since`` .. ``until`` (inclusive, UTC)."""
    bounds: dict[str, Any] = {}
    if since:
        bounds["$gte"] = documents.plain(datetime.combine(date.fromisoformat(since), time()))
    if until:
        end = date.fromisoformat(until) + timedelta(days=1)
        bounds["$lt"] = documents.plain(datetime.combine(end, time()))
    return {"at": bounds} if bounds else {}


class MongoAuditLog(MongoParts):
    """What runs did, row by row."""

    def add_audit(self, rows: Sequence[AuditRow]) -> None:
        if not rows:
            return
        audit = self.db["audit"]
        written = [documents.audit_document(r) for r in rows]
        with self._errors("audit"):
            audit.insert_many(written, session=self._session)
            withdraw_fenced(self.db, "audit", written, self._session)

    def audit_rows(self, selection: AuditSelection = EVERY_ROW) -> Iterator[AuditRow]:
        run_id, since, until = selection.run_id, selection.since, selection.until
        query: dict[str, Any] = {"run_id": run_id} if run_id else {}
        if selection.by is AuditTime.APPLIED:
            days = {op: day for op, day in (("$gte", since), ("$lte", until)) if day}
            if days:
                query["day"] = days
        else:
            times = {}
            if since:
                times["$gte"] = datetime.fromisoformat(since).replace(tzinfo=UTC)
            if until:
                end = datetime.fromisoformat(until).replace(tzinfo=UTC) + timedelta(days=1)
                times["$lt"] = end
            if times:
                query["observed_at"] = times
        with self._errors("audit"):
            for document in self.db["audit"].find(query, session=self._session).sort("_id", 1):
                yield documents.audit_row(document)

    def add_failure(self, failure: Failure) -> None:
        with self._errors("failures"):
            self.db["failures"].insert_one(
                documents.plain(failure.model_dump()), session=self._session
            )

    def failure_counts(
        self, run_id: str | None = None, since: str | None = None, until: str | None = None
    ) -> dict[str, int]:
        query = {**({"run_id": run_id} if run_id else {}), **day_range(since, until)}
        counts = {"environmental": 0, "content": 0}
        with self._errors("failures"):
            for d in self.db["failures"].aggregate(
                [{"$match": query}, {"$group": {"_id": "$failure_class", "n": {"$sum": 1}}}]
            ):
                counts[d["_id"]] = d["n"]
        return counts
