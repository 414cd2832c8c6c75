"""SQL builders for reads: the identity filter goes inside every query, never after it."""

from __future__ import annotations

import re
from typing import Any

from mempipe.adapters.store.sqlite import memory_sql
from mempipe.adapters.store.sqlite.scoped_bm25 import FUNCTION as BM25
from mempipe.domain.declarations import column_for
from mempipe.domain.partition_keys import METADATA_PREFIX
from mempipe.schemas.search import STM, ReadFilter, collection_of

TURN_FIELDS = memory_sql.STM_FILTERS
MEMORY_FIELDS = tuple(f for f in memory_sql.VECTOR_FILTERS if f != "status")


def fts_query(text: str) -> str | None:
    """The words of a free-text query as an FTS5 OR of quoted terms (no FTS syntax leaks in)."""
    words = re.findall(r"\w+", text.lower())
    return " OR ".join(f'"{w}"' for w in dict.fromkeys(words)) or None


def _identity(
    filters: ReadFilter, fields: tuple[str, ...], prefix: str
) -> tuple[list[str], list[Any]]:
    """``field = ?`` for every identity field supplied; an omitted one adds nothing."""
    clauses, values = ["1 = 1"], []
    for field in fields:
        value = getattr(filters, field)
        if value is not None:
            clauses.append(f"{prefix}{field} = ?")
            values.append(getattr(value, "value", value))
    return clauses, values


def read_where(filters: ReadFilter, fields: tuple[str, ...], alias: str) -> tuple[str, list[Any]]:
    """``alias.field = ?`` for every field supplied and every metadata partition key filtered
    on, ANDed; ``1 = 1`` when none is."""
    clauses, values = _identity(filters, fields, f"{alias}.")
    for path, value in filters.metadata.items():
        clauses.append(
            f"json_extract({alias}.metadata, '$.{path.removeprefix(METADATA_PREFIX)}') = ?"
        )
        values.append(value)
    return " AND ".join(clauses), values


def vector_where(filters: ReadFilter, fields: tuple[str, ...]) -> tuple[str, list[Any]]:
    """The same filter as sqlite-vec metadata constraints inside the KNN (identity columns,
    and one column per metadata partition key)."""
    clauses, values = _identity(filters, fields, "")
    for path, value in filters.metadata.items():
        clauses.append(f"{column_for(path.removeprefix(METADATA_PREFIX))} = ?")
        values.append(value)
    return " AND ".join(clauses), values


def text_search_sql(source: str, filters: ReadFilter) -> tuple[str, list[Any]]:
    if source == STM:
        where, values = read_where(filters, TURN_FIELDS, "t")
        return (
            "SELECT t.session_id || '#' || t.turn_seq, t.content, t.org_id, t.project_id, "
            "t.user_id, t.agent_id, t.session_id, NULL, t.message_id, -bm25(turns_fts) "
            "FROM turns_fts JOIN turns t ON t.id = turns_fts.rowid "
            f"WHERE turns_fts MATCH ? AND {where} ORDER BY bm25(turns_fts), t.id LIMIT ?",
            values,
        )
    table, where, values = _memory_source(source, filters)
    return (
        "SELECT m.id, m.text, m.org_id, m.project_id, m.user_id, m.agent_id, m.session_id, "
        f"m.visibility, NULL, -bm25({table}_fts) FROM {table}_fts "
        f"JOIN {table} m ON m.rowid = {table}_fts.rowid WHERE {table}_fts MATCH ? "
        f"AND m.status = 'active' AND {where} ORDER BY bm25({table}_fts), m.rowid LIMIT ?",
        values,
    )


def turn_span_sql(filters: ReadFilter) -> tuple[str, list[Any]]:
    """The lowest and highest id, and the number, of the turns in scope (an index range scan
    when the scope names a user)."""
    where, values = read_where(filters, TURN_FIELDS, "t")
    return f"SELECT min(t.id), max(t.id), count(*) FROM turns t WHERE {where}", values


def scoped_turn_search_sql(filters: ReadFilter, phrases: int) -> tuple[str, list[Any]]:
    """The turns in scope that match inside an id span, each with the bm25 of
    :mod:`scoped_bm25` (its document counts bound first) and its id to break ties. The match is
    walked first (materialized), then joined to the turns: driven from the turns, SQLite would
    start one full-text query per turn."""
    where, values = read_where(filters, TURN_FIELDS, "t")
    counts = ", ".join("?" for _ in range(phrases))
    return (
        f"WITH m AS MATERIALIZED (SELECT rowid AS id, {BM25}(turns_fts, {counts}) AS score "
        "FROM turns_fts WHERE turns_fts MATCH ? AND rowid BETWEEN ? AND ?) "
        "SELECT t.session_id || '#' || t.turn_seq, t.content, t.org_id, t.project_id, "
        "t.user_id, t.agent_id, t.session_id, NULL, t.message_id, m.score, t.id "
        f"FROM m JOIN turns t ON t.id = m.id WHERE {where}",
        values,
    )


def _memory_source(source: str, filters: ReadFilter) -> tuple[str, str, list[Any]]:
    table = memory_sql.table(collection_of(source))
    where, values = read_where(filters, MEMORY_FIELDS, "m")
    if collection_of(source) == "custom":
        where, values = f"{where} AND m.type_name = ?", [*values, source]
    return table, where, values


def vector_search_sql(source: str, model_id: str, filters: ReadFilter) -> tuple[str, list[Any]]:
    """A KNN with the identity filter as sqlite-vec metadata constraints inside it, so that
    ``k`` nearest means the k nearest *in scope*."""
    vectors = memory_sql.vector_table(collection_of(source), model_id)
    if source == STM:
        where, values = vector_where(filters, TURN_FIELDS)
        return (
            "SELECT t.session_id || '#' || t.turn_seq, t.content, t.org_id, t.project_id, "
            "t.user_id, t.agent_id, t.session_id, NULL, t.message_id, 1.0 - v.distance FROM "
            f"(SELECT memory_rowid, distance FROM {vectors} WHERE embedding MATCH ? AND k = ? "
            f"AND {where}) v JOIN turns t ON t.id = v.memory_rowid "
            "ORDER BY v.distance",
            values,
        )
    table = memory_sql.table(collection_of(source))
    where, values = vector_where(filters, MEMORY_FIELDS)
    return (
        "SELECT m.id, m.text, m.org_id, m.project_id, m.user_id, m.agent_id, m.session_id, "
        "m.visibility, NULL, 1.0 - v.distance FROM (SELECT memory_rowid, distance FROM "
        f"{vectors} WHERE embedding MATCH ? AND k = ? AND status = 'active' AND "
        f"{where}) v JOIN {table} m ON m.rowid = v.memory_rowid "
        + ("WHERE m.type_name = ? " if collection_of(source) == "custom" else "")
        + "ORDER BY v.distance",
        values + ([source] if collection_of(source) == "custom" else []),
    )
