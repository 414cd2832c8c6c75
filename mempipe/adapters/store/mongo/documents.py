"""Documents of the MongoDB store, as pure conversions testable without a server.

Turns and memories carry an integer ``_id`` from a counter, so that paging (promotion, re-embed)
is a keyset over one indexed field; a memory's own id is its ``id`` field (unique).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from enum import Enum
from typing import Any

import bson

from mempipe.domain.promotion import TurnStamp
from mempipe.domain.scope import Scope
from mempipe.domain.spoken import spoken_text
from mempipe.schemas.audit import AuditRow
from mempipe.schemas.identity import SESSION_IDENTITY_FIELDS
from mempipe.schemas.memory import MEMORY_MODELS, CustomMemory, MemoryRecord
from mempipe.schemas.search import STM, Hit, ReadFilter, collection_of
from mempipe.schemas.selection import SnapshotSelection
from mempipe.schemas.snapshot import Snapshot
from mempipe.schemas.turn import TURN_KEY, Turn

TURNS = "turns"
IDENTITY_FIELDS = SESSION_IDENTITY_FIELDS
MEMORY_FILTER_FIELDS = (*IDENTITY_FIELDS, "visibility")
MEMORY_FIELDS: dict[str, tuple[str, ...]] = {
    name: tuple(f for f in model.model_fields if f != "embedding")
    for name, model in {**MEMORY_MODELS, "custom": CustomMemory}.items()
}
"""The fields a stored memory of each collection has (its vectors live in per-model fields)."""


def collection_name(collection: str) -> str:
    """The MongoDB collection of a store collection: ``stm`` is ``turns``, memories by type."""
    if collection == STM:
        return TURNS
    if collection not in MEMORY_FIELDS:
        raise ValueError(f"unknown collection {collection!r}")
    return collection


def field_key(name: str) -> str:
    """A name usable as one field of a document (no dots, no leading ``$``)."""
    return name.replace(".", "_").lstrip("$")


def searched_fields(collection: str) -> list[str]:
    """The fields a collection's text index analyses: a turn's speaker name beside its text."""
    return ["content", "name"] if collection == STM else ["text"]


def embedded_text(collection: str, document: dict[str, Any]) -> str:
    """What a record is embedded from: a turn with its speaker's name (``spoken_text``)."""
    if collection == STM:
        return spoken_text(document.get("name"), document["content"])
    return document["text"]


def plain(value: Any) -> Any:
    """A model value as BSON holds it: enums by value, days as ISO text, UTC datetimes."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def turn_document(seq: int, turn: Turn, run_id: str | None) -> dict[str, Any]:
    document = plain(turn.model_dump(exclude={"source", "snapshot_id"}))
    document.update(
        _id=seq,
        metadata=document["metadata"] or None,
        source=turn.source.model_dump(),
        run_id=run_id,
        snapshot_id=None,
    )
    return document


def stamp_from_document(d: dict[str, Any]) -> TurnStamp:
    return TurnStamp(
        d["org_id"],
        d["project_id"],
        d["session_id"],
        d["turn_seq"],
        d.get("created_at"),
        d["role"],
        d["content"],
        d.get("user_id"),
        d.get("agent_id"),
    )


def bson_size(document: dict[str, Any]) -> int:
    """Bytes the document takes as BSON (what the 16 MiB limit counts)."""
    return len(bson.encode(document))


def after_key(key: tuple[Any, ...]) -> dict[str, Any]:
    """Documents whose turn key sorts after ``key``: keyset paging."""
    branches = []
    for depth, field in enumerate(TURN_KEY):
        branch = {TURN_KEY[i]: key[i] for i in range(depth)}
        branch[field] = {"$gt": key[depth]}
        branches.append(branch)
    return {"$or": branches}


def snapshot_document(snapshot: Snapshot, now: datetime) -> dict[str, Any]:
    document = plain(snapshot.model_dump(exclude={"snapshot_id", "extraction"}))
    document.update(
        _id=snapshot.snapshot_id,
        summary_source="rules",
        created_at=now,
        order_at=document["started_at"] or now,
        extraction={
            e.handler: {**e.model_dump(mode="json", exclude={"handler"}), "updated_at": now}
            for e in snapshot.extraction
        },
    )
    return document


def selection_query(selection: SnapshotSelection) -> dict[str, Any]:
    """The snapshots a selection names; every given field is ANDed."""
    query: dict[str, Any] = {
        field: value
        for field in ("org_id", "project_id", "user_id", "session_id")
        if (value := getattr(selection, field)) is not None
    }
    if selection.snapshot_ids:
        query["_id"] = {"$in": list(selection.snapshot_ids)}
    if selection.since is not None:
        query["$or"] = [
            {"ended_at": {"$gte": plain(selection.since)}},
            {"ended_at": None, "created_at": {"$gte": plain(selection.since)}},
        ]
    if selection.until is not None:
        query["order_at"] = {"$lt": plain(selection.until)}
    return query


def memory_document(seq: int, record: MemoryRecord) -> dict[str, Any]:
    document = plain(record.model_dump(exclude={"embedding"}))
    document.update(_id=seq, metadata=document["metadata"] or None)
    return document


def scope_query(scope: Scope, memory_type: str) -> dict[str, Any]:
    """Active records of the scope a memory is reconciled in: every read's rule, except that a
    memory without an agent is reconciled among those without one (its own scope), so that
    the order records arrive in cannot decide what is merged."""
    query = {**read_query(ReadFilter(**scope.model_dump()), memory_type), "status": "active"}
    if scope.agent_id is None:
        query["agent_id"] = {"$eq": None}
    return query


def read_query(filters: ReadFilter, collection: str) -> dict[str, Any]:
    """Every identity field supplied and every metadata partition key filtered on, as ``$eq``
    clauses ANDed (an omitted field adds nothing). The same document is a ``find`` filter and
    the ``filter`` of a ``$vectorSearch`` stage."""
    fields = IDENTITY_FIELDS if collection == STM else MEMORY_FILTER_FIELDS
    query: dict[str, Any] = {
        field: {"$eq": plain(value)}
        for field in fields
        if (value := getattr(filters, field)) is not None
    }
    for path, value in filters.metadata.items():
        query[path] = {"$eq": value}
    return query


def source_query(source: str, filters: ReadFilter) -> dict[str, Any]:
    """What a search over ``source`` may return: the read filter, active records only, and
    for a custom type, that type."""
    collection = collection_of(source)
    query = read_query(filters, collection)
    if collection != STM:
        query["status"] = {"$eq": "active"}
    if collection == "custom":
        query["type_name"] = {"$eq": source}
    return query


def hit(source: str, document: dict[str, Any], score: float) -> Hit:
    identity = {field: document.get(field) for field in IDENTITY_FIELDS}
    if collection_of(source) == STM:
        return Hit(
            id=f"{document['session_id']}#{document['turn_seq']}",
            source=source,
            score=score,
            text=document["content"],
            message_id=document.get("message_id"),
            name=document.get("name"),
            **identity,
        )
    return Hit(
        id=document["id"],
        source=source,
        score=score,
        text=document["text"],
        visibility=document.get("visibility"),
        **identity,
    )


HIT_FIELDS = {
    field: 1
    for field in (
        "id",
        "text",
        "content",
        "turn_seq",
        "message_id",
        "name",
        *MEMORY_FILTER_FIELDS,
    )
}


def audit_document(row: AuditRow) -> dict[str, Any]:
    return plain(row.model_dump())


def audit_row(document: dict[str, Any]) -> AuditRow:
    return AuditRow.model_validate({k: v for k, v in document.items() if k != "_id"})
