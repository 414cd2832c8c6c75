"""Turn and snapshot identity includes the user: two users' archives may reuse the same session
ids ("1", "support-118") and must never be merged. The keys become (org, project, user,
session, seq), a missing user counting as one user of its own."""

from __future__ import annotations

from typing import Any


def apply(store: Any) -> None:
    user = [("org_id", 1), ("project_id", 1), ("user_id", 1), ("session_id", 1)]
    turns, snapshots = store.db["turns"], store.db["snapshots"]
    for collection, name in (
        (turns, "turn_key"),
        (turns, "turns_unpromoted"),
        (snapshots, "snapshot_key"),
    ):
        if name in collection.index_information():
            collection.drop_index(name)
    turns.create_index([*user, ("turn_seq", 1)], unique=True, name="turn_key")
    turns.create_index([("snapshot_id", 1), *user, ("turn_seq", 1)], name="turns_unpromoted")
    snapshots.create_index([*user, ("first_turn_seq", 1)], unique=True, name="snapshot_key")
