"""Audit rows carry when their evidence happened (``observed_at``: the snapshot's time) beside
when they were applied; rows written before are given their snapshot's time."""

from __future__ import annotations

from typing import Any


def apply(store: Any) -> None:
    audit, snapshots = store.db["audit"], store.db["snapshots"]
    for snapshot_id in audit.distinct("snapshot_id", {"observed_at": None}):
        snapshot = snapshots.find_one({"_id": snapshot_id}, {"started_at": 1, "created_at": 1})
        if snapshot is not None:
            at = snapshot.get("started_at") or snapshot.get("created_at")
            audit.update_many(
                {"snapshot_id": snapshot_id, "observed_at": None}, {"$set": {"observed_at": at}}
            )
    audit.create_index([("observed_at", 1)], name="audit_observed")
