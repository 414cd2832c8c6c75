"""The MongoDB store's erasure role: one user's turns, snapshots and private memories deleted
(their vectors are fields of the documents; the search indexes follow the deletes), the user's
audit text redacted."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from mempipe.adapters.store.mongo import documents
from mempipe.adapters.store.mongo.base import MongoParts
from mempipe.adapters.store.mongo.fence import fenced, fences_for
from mempipe.adapters.store.writer_epoch import fence_time
from mempipe.errors import ConfigError
from mempipe.schemas.bundle import REDACTED, BundleSelection, StoredUser
from mempipe.schemas.memory import MEMORY_COLLECTIONS


class MongoErasure(MongoParts):
    """Data requests: what one user's erase removes."""

    def erase_user(self, selection: BundleSelection, *, dry_run: bool) -> dict[str, int]:
        """Counts of what goes (``dry_run``: of what would go; nothing changes)."""
        owner = _owner(selection)
        db = self.db
        snapshot_ids = db["snapshots"].distinct("_id", owner)
        private = {**owner, "visibility": "private"}
        unredacted = {**owner, "text": {"$ne": REDACTED}}
        counts = {
            "turns": db[documents.TURNS].count_documents(owner),
            "snapshots": len(snapshot_ids),
            "extraction_states": sum(
                len(d.get("extraction") or {})
                for d in db["snapshots"].find(owner, {"extraction": 1})
            ),
            "failures": db["failures"].count_documents({"snapshot_id": {"$in": snapshot_ids}}),
            "audit_redacted": db["audit"].count_documents(unredacted),
            **{c: db[c].count_documents(private) for c in MEMORY_COLLECTIONS},
        }
        counts["vectors"] = self._vectors(owner, private)
        if dry_run:
            return counts
        with self._errors("erase"):
            db["erased_owners"].insert_one(
                {
                    "user_id": selection.user_id,
                    "org_id": selection.org_id,
                    "project_id": selection.project_id,
                    "erased_at": fence_time(datetime.now(UTC)),
                }
            )
            db[documents.TURNS].delete_many(owner)
            db["failures"].delete_many({"snapshot_id": {"$in": snapshot_ids}})
            db["snapshots"].delete_many(owner)
            for collection in MEMORY_COLLECTIONS:
                db[collection].delete_many(private)
            db["audit"].update_many(unredacted, {"$set": {"text": REDACTED}})
        return counts

    def erased_since(
        self, org_id: str, project_id: str, user_id: str | None, epoch: datetime
    ) -> bool:
        """Whether an erase of this owner was recorded after ``epoch`` (checked by replay
        inside its write transaction, where the server has transactions)."""
        owner = {"user_id": user_id, "org_id": org_id, "project_id": project_id}
        users = {user_id} if user_id else set()
        return fenced(owner, fences_for(self.db, users, epoch, self._session))

    def stored_users(self, selection: BundleSelection) -> list[StoredUser]:
        within = {k: v for k, v in selection.model_dump().items() if v is not None}
        found: dict[tuple[str, str, str | None], StoredUser] = {}
        for collection, counted, last in [
            (documents.TURNS, "turns", "created_at"),
            *((c, "memories", "updated_at") for c in MEMORY_COLLECTIONS),
        ]:
            groups = self.db[collection].aggregate(
                [
                    {"$match": within},
                    {
                        "$group": {
                            "_id": {"o": "$org_id", "p": "$project_id", "u": "$user_id"},
                            "n": {"$sum": 1},
                            "first": {"$min": "$created_at"},
                            "last": {"$max": f"${last}"},
                        }
                    },
                ]
            )
            for group in groups:
                key = (group["_id"]["o"], group["_id"]["p"], group["_id"].get("u"))
                user = found.setdefault(
                    key, StoredUser(org_id=key[0], project_id=key[1], user_id=key[2])
                )
                setattr(user, counted, getattr(user, counted) + group["n"])
                user.first_seen = _earliest(user.first_seen, group["first"])
                user.last_seen = _latest(user.last_seen, group["last"])
        return [found[key] for key in sorted(found, key=str)]

    def erased_owners(self, selection: BundleSelection) -> list[BundleSelection]:
        within = {k: {"$in": [v, None]} for k, v in selection.model_dump().items() if v is not None}
        owners = (
            BundleSelection(
                org_id=d.get("org_id"), project_id=d.get("project_id"), user_id=d["user_id"]
            )
            for d in self.db["erased_owners"].find(within).sort("erased_at", 1)
        )
        return list(dict.fromkeys(owners))

    def _vectors(self, owner: dict[str, Any], private: dict[str, Any]) -> int:
        held = 0
        for entry in self.registry():
            path = self._entry(entry.collection, entry.model_id)["path"]
            query = owner if entry.collection == "stm" else private
            held += self._collection(entry.collection).count_documents(
                {**query, path: {"$exists": True}}
            )
        return held


def _earliest(held: datetime | None, value: Any) -> datetime | None:
    value = _moment(value)
    return value if held is None or (value is not None and value < held) else held


def _latest(held: datetime | None, value: Any) -> datetime | None:
    value = _moment(value)
    return value if held is None or (value is not None and value > held) else held


def _moment(value: Any) -> datetime | None:
    """A stored time as an aware datetime (MongoDB hands back naive UTC, or ISO text)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _owner(selection: BundleSelection) -> dict[str, str]:
    if selection.user_id is None:
        raise ConfigError("an erase names its user: give --user-id")
    return {k: v for k, v in selection.model_dump().items() if v is not None}
