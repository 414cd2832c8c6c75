"""The MongoDB store's retention role: each owner's records read in turn (newest first, one
owner in memory at a time) and judged by the domain's rules (:mod:`mempipe.domain.retention`,
what SQLite says in SQL); what expires is queued in a collection of its own, and forgotten in
batches, the records and their FORGET audit rows in one transaction where the server has them.

Why not MongoDB's TTL indexes: a TTL index deletes a document some time after a date field, on
the server's clock, about once a minute, and says nothing. A policy here needs what it cannot
do: a turn waits for its snapshot's extraction, a cap counts a user's records, pins and a
memory's versions decide together, a plan must count first, and each forgotten record leaves
an audit row and a fence on its evidence."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Sequence
from datetime import UTC, datetime
from itertools import groupby
from typing import Any

from pymongo import ASCENDING, DESCENDING

from mempipe.adapters.store.mongo import documents
from mempipe.adapters.store.mongo.base import TRANSACTION_BUDGET, MongoParts, budgeted
from mempipe.domain.retention import Held, owner_expired, versions_expired
from mempipe.schemas.audit import AuditRow, ReconcileAction
from mempipe.schemas.bundle import REDACTED
from mempipe.schemas.retention import (
    RETAINED,
    TURNS,
    Expiry,
    ForgetCount,
    forget_counts,
    retained_of,
    source_of,
)
from mempipe.schemas.search import Hit

QUEUE = "forget_queue"
OWNER = ("org_id", "project_id", "user_id")
Owner = tuple[str, str, str | None]


def _utc(value: datetime | None) -> datetime | None:
    """A time as MongoDB gives it back (naive, in UTC) made aware."""
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _documents(collection: str) -> str:
    return documents.collection_name(source_of(collection))


def _key(collection: str, document: dict[str, Any]) -> str:
    """A record's id as a search hit gives it: a turn's is its place in its session."""
    if collection == TURNS:
        return f"{document['session_id']}#{document['turn_seq']}"
    return str(document["id"])


def _owner(document: dict[str, Any]) -> Owner:
    return (document["org_id"], document["project_id"], document.get("user_id"))


class MongoRetention(MongoParts):
    """Forgetting by policy."""

    add_audit: Callable[[Sequence[AuditRow]], None]

    def _expired(
        self, expiry: Expiry, collection: str, owners: Sequence[str | None] | None = None
    ) -> Iterator[tuple[Owner, dict[Hashable, str]]]:
        """Each owner's expired records of ``collection``: ``_id`` to rule."""
        if collection not in expiry.policy.ruled:
            return
        match: dict[str, Any] = {"user_id": {"$nin": list(expiry.policy.pinned_users)}}
        if owners is not None:
            match["user_id"] = {"$in": [u for u in owners if u not in expiry.policy.pinned_users]}
        name = _documents(collection)
        when = "created_at" if collection == TURNS else "updated_at"
        order = [(f, ASCENDING) for f in OWNER] + [(when, DESCENDING), ("_id", DESCENDING)]
        with self._errors(name):
            cursor = self.db[name].find(match).sort(order)
            for owner, found in groupby(cursor, key=_owner):
                records = list(found)
                judged = (
                    self._turns_expired(records, expiry)
                    if collection == TURNS
                    else self._memories_expired(records, collection, expiry)
                )
                if judged:
                    yield owner, judged

    def _turns_expired(self, turns: list[dict[str, Any]], expiry: Expiry) -> dict[Hashable, str]:
        held = [Held(t["_id"], _utc(t.get("created_at"))) for t in turns]
        expired = owner_expired(held, TURNS, expiry)
        snapshots = {
            t["snapshot_id"] for t in turns if t["_id"] in expired and t.get("snapshot_id")
        }
        extracted = {
            s["_id"]
            for s in self.db["snapshots"].find({"_id": {"$in": list(snapshots)}}, {"extraction": 1})
            if s.get("extraction")
            and all(state["status"] == "done" for state in s["extraction"].values())
        }
        return {
            t["_id"]: expired[t["_id"]]
            for t in turns
            if t["_id"] in expired and t.get("snapshot_id") in extracted
        }

    def _memories_expired(
        self, memories: list[dict[str, Any]], collection: str, expiry: Expiry
    ) -> dict[Hashable, str]:
        evidence = {s for m in memories for s in m.get("evidence") or ()}
        times = {
            s["_id"]: _utc(s.get("ended_at") or s.get("started_at") or s.get("created_at"))
            for s in self.db["snapshots"].find(
                {"_id": {"$in": list(evidence)}}, {"ended_at": 1, "started_at": 1, "created_at": 1}
            )
        }

        def confirmed(memory: dict[str, Any]) -> datetime | None:
            taught = [t for s in memory.get("evidence") or () if (t := times.get(s)) is not None]
            return max(taught) if taught else _utc(memory.get("updated_at"))

        pinned = set(expiry.policy.pinned_memories)
        at = {m["_id"]: confirmed(m) for m in memories if m["status"] == "active"}
        heads = sorted(
            (m for m in memories if m["_id"] in at),
            key=lambda m: (at[m["_id"]] or datetime.min.replace(tzinfo=UTC), m["_id"]),
            reverse=True,
        )
        held = [Held(m["_id"], at[m["_id"]], counted=m["id"] not in pinned) for m in heads]
        expired = owner_expired(held, collection, expiry)
        by_id = {m["id"]: m for m in memories}
        chains: dict[Hashable, list[Hashable]] = {}
        for head in heads:
            versions, earlier = [], by_id.get(head.get("supersedes_id"))
            while earlier is not None and earlier["status"] == "superseded":
                versions.append(earlier["_id"])
                earlier = by_id.get(earlier.get("supersedes_id"))
            chains[head["_id"]] = versions
        expired.update(versions_expired(chains, expired, expiry.policy.keep_versions))
        ids = {m["_id"]: m["id"] for m in memories}
        return {key: rule for key, rule in expired.items() if ids[key] not in pinned}

    def expired_counts(self, expiry: Expiry) -> list[ForgetCount]:
        counts = []
        for collection in RETAINED:
            for owner, judged in self._expired(expiry, collection):
                rules = sorted(Counter(judged.values()).items())
                counts += forget_counts(collection, [(*owner, r, n) for r, n in rules])
        return sorted(counts, key=lambda c: (c.org_id, c.project_id, c.user_id or "", c.rule))

    def queue_expired(self, expiry: Expiry, collection: str) -> int:
        queue = self.db[QUEUE]
        with self._errors(QUEUE):
            queue.delete_many({})
            queued = 0
            for _, judged in self._expired(expiry, collection):
                queue.insert_many([{"_id": key, "rule": rule} for key, rule in judged.items()])
                queued += len(judged)
        return queued

    def forget_queued(
        self, collection: str, limit: int, run_id: str, at: datetime
    ) -> list[ForgetCount]:
        queue = self.db[QUEUE]
        name = _documents(collection)
        with self._errors(QUEUE):
            batch = {q["_id"]: q["rule"] for q in queue.find().sort("_id", 1).limit(limit)}
        if not batch:
            return []
        rows: list[AuditRow] = []
        for chunk in budgeted(list(batch), lambda _: 2, TRANSACTION_BUDGET):
            with self.write_transaction(), self._errors(name):
                found = list(self.db[name].find({"_id": {"$in": chunk}}, session=self._session))
                written = [_forgotten(collection, run_id, at, batch[d["_id"]], d) for d in found]
                self.db[name].delete_many({"_id": {"$in": chunk}}, session=self._session)
                self._after(collection, found, at)
                self.add_audit(written)
                queue.delete_many({"_id": {"$in": chunk}}, session=self._session)
                rows += written
        return _counted(collection, rows)

    def _after(self, collection: str, found: list[dict[str, Any]], at: datetime) -> None:
        """A memory's earlier audit text redacted and its evidence fenced; a snapshot whose
        turns are all gone emptied and fenced whole."""
        snapshots = self.db["snapshots"]
        if collection == TURNS:
            touched = {d["snapshot_id"] for d in found if d.get("snapshot_id")}
            left = set(
                self.db[documents.TURNS].distinct(
                    "snapshot_id", {"snapshot_id": {"$in": list(touched)}}, session=self._session
                )
            )
            emptied = list(touched - left)
            snapshots.update_many(
                {"_id": {"$in": emptied}},
                {"$set": {"summary": "", "forgotten_at": at}, "$addToSet": {"forgotten": "*"}},
                session=self._session,
            )
            return
        self.db["audit"].update_many(
            {
                "memory_type": collection,
                "memory_id": {"$in": [d["id"] for d in found]},
                "text": {"$ne": REDACTED},
                "action": {"$ne": ReconcileAction.FORGET.value},
            },
            {"$set": {"text": REDACTED}},
            session=self._session,
        )
        snapshots.update_many(
            {"_id": {"$in": sorted({s for d in found for s in d.get("evidence") or ()})}},
            {"$addToSet": {"forgotten": collection}},
            session=self._session,
        )

    def forgotten_memories(self) -> set[tuple[str, str]]:
        with self._errors("audit"):
            found = self.db["audit"].find(
                {"action": ReconcileAction.FORGET.value, "memory_type": {"$ne": TURNS}},
                {"memory_type": 1, "memory_id": 1},
            )
            return {(d["memory_type"], d["memory_id"]) for d in found}

    def expired_among(self, source: str, hits: Sequence[Hit], expiry: Expiry) -> set[str]:
        collection = retained_of(source)
        if not hits or collection not in RETAINED:
            return set()
        owners = sorted({h.user_id for h in hits}, key=str)
        keys = {key for _, judged in self._expired(expiry, collection, owners) for key in judged}
        if not keys:
            return set()
        name = _documents(collection)
        fields = {"session_id": 1, "turn_seq": 1, "id": 1}
        return {
            _key(collection, d) for d in self.db[name].find({"_id": {"$in": sorted(keys)}}, fields)
        } & {h.id for h in hits}


def _counted(collection: str, rows: Sequence[AuditRow]) -> list[ForgetCount]:
    owners = Counter((r.org_id, r.project_id, r.user_id, r.rule or "") for r in rows)
    return forget_counts(collection, [(*owner, n) for owner, n in owners.items()])


def _forgotten(
    collection: str, run_id: str, at: datetime, rule: str, document: dict[str, Any]
) -> AuditRow:
    turn = collection == TURNS
    return AuditRow(
        run_id=run_id,
        at=at,
        day=at.date(),
        org_id=document["org_id"],
        project_id=document["project_id"],
        user_id=document.get("user_id"),
        agent_id=document.get("agent_id"),
        memory_type=collection,
        action=ReconcileAction.FORGET,
        memory_id=_key(collection, document),
        version=1 if turn else document.get("version", 1),
        snapshot_id=document.get("snapshot_id") if turn else None,
        text="",
        rule=rule,
    )
