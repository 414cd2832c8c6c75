"""SQL for long-term memories in SQLite: one table per type, an FTS5 index and one sqlite-vec
table per (type, embedding model)."""

from __future__ import annotations

import re
from typing import Any

import orjson

from mempipe.adapters.store.sqlite.sql import iso
from mempipe.domain.scope import Scope
from mempipe.schemas.memory import MemoryRecord

COMMON = (
    "id",
    "org_id",
    "project_id",
    "user_id",
    "agent_id",
    "session_id",
    "visibility",
    "text",
    "embedding_model_id",
    "has_embedding",
    "status",
    "version",
    "supersedes_id",
    "reinforcement_count",
    "evidence",
    "metadata",
    "source",
    "created_at",
    "updated_at",
)
SPECIFIC: dict[str, tuple[str, ...]] = {
    "semantic": ("label",),
    "episodic": ("participants", "occurred_at"),
    "procedural": ("name", "steps", "when_to_use"),
    "taxonomic": ("term", "definition", "domain"),
    "custom": ("type_name", "tags"),
}
KEY_COLUMN = {"semantic": "label", "procedural": "name", "taxonomic": "term"}
VECTOR_FILTERS = (
    "org_id",
    "project_id",
    "user_id",
    "agent_id",
    "session_id",
    "visibility",
    "status",
)


STM_FILTERS = ("org_id", "project_id", "user_id", "agent_id", "session_id")


def vector_table_ddl_for(collection: str, name: str, dimensions: int) -> str:
    """Turns (``stm``) and memories have different filter columns."""
    if collection == "stm":
        filters = ", ".join(f"{column} text" for column in STM_FILTERS)
        return (
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING vec0("
            f"memory_rowid integer primary key, embedding float[{dimensions}] "
            f"distance_metric=cosine, {filters})"
        )
    return vector_table_ddl(name, dimensions)


def source_table(collection: str) -> tuple[str, str, tuple[str, ...]]:
    """(table, text column, vector filter columns) of a collection."""
    if collection == "stm":
        return "turns", "content", STM_FILTERS
    return table(collection), "text", VECTOR_FILTERS


def table(memory_type: str) -> str:
    if memory_type not in SPECIFIC:
        raise ValueError(f"unknown memory type {memory_type!r}")
    return f"memories_{memory_type}"


def vector_table(memory_type: str, model_id: str) -> str:
    return f"vec_{memory_type}__{re.sub(r'[^a-z0-9]+', '_', model_id.lower()).strip('_')}"


def vector_table_ddl(name: str, dimensions: int) -> str:
    filters = ", ".join(f"{column} text" for column in VECTOR_FILTERS)
    return (
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING vec0("
        f"memory_rowid integer primary key, embedding float[{dimensions}] distance_metric=cosine, "
        f"{filters})"
    )


def insert_sql(memory_type: str) -> str:
    columns = (*COMMON, *SPECIFIC[memory_type])
    return (
        f"INSERT INTO {table(memory_type)} ({', '.join(columns)}) "
        f"VALUES ({', '.join('?' for _ in columns)}) RETURNING rowid"
    )


def _value(value: Any) -> Any:
    if isinstance(value, list | dict):
        return orjson.dumps(value).decode()
    if hasattr(value, "isoformat"):
        return iso(value)
    if hasattr(value, "value"):
        return value.value
    if isinstance(value, bool):
        return int(value)
    return value


def record_row(memory_type: str, record: MemoryRecord) -> tuple[Any, ...]:
    data = record.model_dump()
    data["metadata"] = data["metadata"] or None
    return tuple(_value(data[c]) for c in (*COMMON, *SPECIFIC[memory_type]))


def scope_where(scope: Scope, alias: str = "") -> tuple[str, list[Any]]:
    """AND of every identity field the scope supplies; a None leaves that dimension open."""
    prefix = f"{alias}." if alias else ""
    clauses, values = [], []
    for column in ("org_id", "project_id", "user_id", "agent_id", "visibility"):
        value = getattr(scope, column)
        if value is not None:
            clauses.append(f"{prefix}{column} = ?")
            values.append(value.value if hasattr(value, "value") else value)
    return " AND ".join(clauses), values


def vector_filters(scope: Scope) -> tuple[str, list[Any]]:
    """The same AND as sqlite-vec metadata filters inside the KNN query, active records only."""
    where, values = scope_where(scope)
    return f"status = ? AND {where}", ["active", *values]


def vector_row(rowid: int, record: MemoryRecord, embedding: bytes) -> tuple[Any, ...]:
    return (
        rowid,
        embedding,
        record.org_id,
        record.project_id,
        record.user_id or "",
        record.agent_id or "",
        record.session_id or "",
        record.visibility.value,
        record.status.value,
    )
