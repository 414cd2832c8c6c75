"""The MongoDB store's turns role: turns written once per key, and promoted into snapshots."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pymongo import InsertOne, UpdateMany, UpdateOne
from pymongo.errors import BulkWriteError, PyMongoError

from mempipe.adapters.store.base import OneBatchAtATime
from mempipe.adapters.store.mongo import documents
from mempipe.adapters.store.mongo.base import TRANSACTION_BUDGET, MongoParts, budgeted, now
from mempipe.adapters.store.mongo.exceptions import StoreUnavailableError, translate
from mempipe.adapters.store.mongo.fence import withdraw_fenced
from mempipe.adapters.store.rejects import conflict_reject, turn_reject
from mempipe.domain.promotion import TurnStamp
from mempipe.schemas.reject import Reject
from mempipe.schemas.snapshot import Snapshot
from mempipe.schemas.summaries import TurnWriteResult
from mempipe.schemas.turn import TURN_KEY, Turn

DUPLICATE_KEY = 11000
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
"""MongoDB's BSON document size limit."""
SIZE_CHECK_FROM = 1024 * 1024
"""Turns with less text than this cannot reach the limit: only larger ones are measured."""


class MongoTurns(OneBatchAtATime, MongoParts):
    """Short-term memory: the raw turns and the snapshots cut from them."""

    def add_turns(self, turns: Sequence[Turn], run_id: str | None) -> TurnWriteResult:
        if not turns:
            return TurnWriteResult()
        ids = self._next_ids("turns", len(turns))
        oversize: list[Reject] = []
        requests: list[InsertOne] = []
        sent: list[Turn] = []
        for i, turn in zip(ids, turns, strict=True):
            document = documents.turn_document(i, turn, run_id)
            size = documents.bson_size(document) if len(turn.content) > SIZE_CHECK_FROM else 0
            if size > MAX_DOCUMENT_BYTES:
                reason = f"{size:,} bytes: over MongoDB's 16 MiB document limit"
                oversize.append(turn_reject(turn, reason))
            else:
                requests.append(InsertOne(document))
                sent.append(turn)
        write_errors: list[dict[str, Any]] = []
        inserted = 0
        try:
            if requests:
                inserted = self.db["turns"].bulk_write(requests, ordered=False).inserted_count
        except BulkWriteError as exc:
            if exc.details.get("writeConcernErrors"):
                raise StoreUnavailableError(
                    f"{self.url} turns: the write concern was not satisfied "
                    f"({exc.details['writeConcernErrors'][0].get('errmsg', '')}); the batch is "
                    "retried (turn writes are idempotent)"
                ) from exc
            inserted = exc.details["nInserted"]
            write_errors = exc.details["writeErrors"]
        except PyMongoError as exc:
            raise translate(exc, f"{self.url} turns") from exc
        with self._errors("turns"):
            erased = len(withdraw_fenced(self.db, "turns", [r._doc for r in requests]))
        duplicates = [sent[e["index"]] for e in write_errors if e["code"] == DUPLICATE_KEY]
        conflicts = self._conflicts(duplicates)
        failed = [
            turn_reject(sent[e["index"]], f"write error {e['code']}: {e.get('errmsg', '')}")
            for e in write_errors
            if e["code"] != DUPLICATE_KEY
        ]
        return TurnWriteResult(
            inserted=inserted - erased,
            duplicates=len(duplicates) - len(conflicts),
            conflicts=[*conflicts, *failed, *oversize],
            erased=erased,
        )

    def _conflicts(self, duplicates: Sequence[Turn]) -> list[Reject]:
        """Skipped turns whose key is stored with other content: rejects, not duplicates."""
        if not duplicates:
            return []
        keys = [{f: getattr(t, f) for f in TURN_KEY} for t in duplicates]
        with self._errors("turns"):
            stored = {
                tuple(d[f] for f in TURN_KEY): d
                for d in self.db["turns"].find(
                    {"$or": keys},
                    {**{f: 1 for f in TURN_KEY}, "role": 1, "content": 1, "source": 1},
                )
            }
        conflicts = []
        for turn in duplicates:
            found = stored[tuple(getattr(turn, f) for f in TURN_KEY)]
            if (found["role"], found["content"]) == (turn.role.value, turn.content):
                continue
            source = found["source"]
            conflicts.append(
                conflict_reject(turn, source["path"], source.get("line"), source.get("index"))
            )
        return conflicts

    def count_unpromoted_turns(self) -> int:
        with self._errors("turns"):
            return self.db["turns"].count_documents({"snapshot_id": None})

    def iter_unpromoted_turns(self, page_size: int = 5000) -> Iterator[TurnStamp]:
        last: tuple[Any, ...] | None = None
        order = [(field, 1) for field in TURN_KEY]
        while True:
            query: dict[str, Any] = {"snapshot_id": None}
            if last is not None:
                query.update(documents.after_key(last))
            with self._errors("turns"):
                page = list(self.db["turns"].find(query).sort(order).limit(page_size))
            if not page:
                return
            last = tuple(page[-1][f] for f in TURN_KEY)
            for document in page:
                yield documents.stamp_from_document(document)
            if len(page) < page_size:
                return

    def add_snapshots(self, snapshots: Sequence[Snapshot]) -> set[str]:
        """Snapshots upserted (``$setOnInsert`` on the deterministic ``_id``: one already stored
        is left as it is, and no duplicate-key error is raised, which inside a transaction
        would abort it whatever ``ordered`` says), then their turns marked promoted. Each chunk
        of about ``TRANSACTION_BUDGET`` documents is one transaction where the deployment has
        them; without one, a crash between the two leaves turns that the next promotion cuts
        into the same snapshots again, which then only marks them."""
        created: set[str] = set()
        for chunk in budgeted(snapshots, lambda s: 1 + s.turn_count, TRANSACTION_BUDGET):
            created |= self._save_snapshot_chunk(chunk)
        return created

    def _save_snapshot_chunk(self, snapshots: Sequence[Snapshot]) -> set[str]:
        at = now()
        upserts = []
        for snapshot in snapshots:
            document = documents.snapshot_document(snapshot, at)
            key = document.pop("_id")
            upserts.append(UpdateOne({"_id": key}, {"$setOnInsert": document}, upsert=True))
        marks = [
            UpdateMany(
                {
                    "org_id": s.org_id,
                    "project_id": s.project_id,
                    "user_id": s.user_id,
                    "session_id": s.session_id,
                    "turn_seq": {"$gte": s.first_turn_seq, "$lte": s.last_turn_seq},
                    "snapshot_id": None,
                },
                {"$set": {"snapshot_id": s.snapshot_id}},
            )
            for s in snapshots
        ]
        with self.write_transaction(), self._errors("snapshots"):
            result = self.db["snapshots"].bulk_write(upserts, session=self._session)
            self.db["turns"].bulk_write(marks, session=self._session)
            by_id = {s.snapshot_id: s for s in snapshots}
            created = [
                documents.snapshot_document(by_id[i], at) for i in result.upserted_ids.values()
            ]
            gone = withdraw_fenced(self.db, "snapshots", created, self._session)
        return set(result.upserted_ids.values()) - set(gone)
