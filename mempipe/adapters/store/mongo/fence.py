"""The erase fence on MongoDB, which has no triggers: a writer writes, then withdraws what it
just wrote of an owner erased since its work began. An erase records its fence before it
deletes, so a document written before the fence is removed by the erase's delete, and one
written after it is removed here: either way none stays."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pymongo.client_session import ClientSession
from pymongo.database import Database

from mempipe.adapters.store.writer_epoch import fence_time, writer_epoch


def fences_for(
    db: Database, users: set[str], epoch: datetime, session: ClientSession | None = None
) -> list[dict[str, Any]]:
    """The fences on any of ``users`` recorded after ``epoch``."""
    if not users:
        return []
    return list(
        db["erased_owners"].find(
            {"user_id": {"$in": sorted(users)}, "erased_at": {"$gt": fence_time(epoch)}},
            session=session,
        )
    )


def fenced(document: dict[str, Any], fences: Sequence[dict[str, Any]]) -> bool:
    return any(
        fence["user_id"] == document.get("user_id")
        and fence.get("org_id") in (None, document.get("org_id"))
        and fence.get("project_id") in (None, document.get("project_id"))
        for fence in fences
    )


def withdraw_fenced(
    db: Database,
    collection: str,
    documents: Sequence[dict[str, Any]],
    session: ClientSession | None = None,
) -> list[Any]:
    """Delete the just-written ``documents`` whose owner an erase fenced; their ids."""
    users = {d["user_id"] for d in documents if d.get("user_id")}
    fences = fences_for(db, users, writer_epoch(), session)
    gone = [d["_id"] for d in documents if fenced(d, fences)]
    if gone:
        db[collection].delete_many({"_id": {"$in": gone}}, session=session)
    return gone
