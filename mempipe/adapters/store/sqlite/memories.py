"""The SQLite store's memories role: long-term memories (table, FTS5, sqlite-vec), their
reconciliation candidates and version changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from mempipe.adapters.store.sqlite import memory_sql, search_sql, sql
from mempipe.adapters.store.sqlite.base import SqliteParts, blob, now_text
from mempipe.domain.reconcile import Candidate
from mempipe.schemas.bundle import BUNDLE_MODELS
from mempipe.schemas.memory import KEY_FIELDS, MemoryRecord
from mempipe.schemas.search import CandidateQuery, ReadFilter


class SqliteMemories(SqliteParts):
    """Long-term memory records; written inside the caller's write transaction."""

    insert_vector: Callable[[str, str, int, list[float]], bool]

    def memory_candidates(self, asked: CandidateQuery) -> list[Candidate]:
        table = memory_sql.table(asked.memory_type)
        key_column = KEY_FIELDS.get(asked.memory_type)
        filters = ReadFilter(**asked.scope.model_dump())
        where, values = search_sql.read_where(filters, search_sql.MEMORY_FIELDS, "m")
        if asked.scope.agent_id is None:  # the memory's own scope: no agent is none, not any
            where += " AND m.agent_id IS NULL"
        found: dict[str, Candidate] = {}
        if asked.key is not None and key_column is not None:
            for memory_id, text, evidence in self._rows(
                f"SELECT m.id, m.text, m.evidence FROM {table} m WHERE {where} "
                f"AND m.status = 'active' AND m.{key_column} = ?",
                (*values, asked.key),
            ):
                found[memory_id] = Candidate(
                    memory_id, asked.key, text, None, tuple(orjson.loads(evidence))
                )
        if asked.taught_by is not None:
            key_select = f"m.{key_column}" if key_column else "NULL"
            for memory_id, text, evidence, found_key in self._rows(
                f"SELECT m.id, m.text, m.evidence, {key_select} FROM {table} m WHERE {where} "
                "AND m.status = 'active' AND EXISTS "
                "(SELECT 1 FROM json_each(m.evidence) WHERE value = ?)",
                (*values, asked.taught_by),
            ):
                found.setdefault(
                    memory_id,
                    Candidate(memory_id, found_key, text, None, tuple(orjson.loads(evidence))),
                )
        if asked.near is not None:
            vec_table = memory_sql.vector_table(asked.memory_type, asked.near.model_id)
            constraints, filter_values = search_sql.vector_where(filters, search_sql.MEMORY_FIELDS)
            if asked.scope.agent_id is None:
                constraints += " AND agent_id = ''"
            key_select = f"m.{key_column}" if key_column else "NULL"
            for memory_id, text, evidence, found_key, distance in self._rows(
                f"SELECT m.id, m.text, m.evidence, {key_select}, v.distance FROM "
                f"(SELECT memory_rowid, distance FROM {vec_table} WHERE embedding MATCH ? "
                f"AND k = ? AND status = 'active' AND {constraints}) v "
                f"JOIN {table} m ON m.rowid = v.memory_rowid",
                (blob(asked.near.vector), asked.k, *filter_values),
            ):
                if distance is None:
                    continue
                found[memory_id] = Candidate(
                    memory_id, found_key, text, 1.0 - distance, tuple(orjson.loads(evidence))
                )
        return list(found.values())

    def add_memory(
        self, memory_type: str, record: MemoryRecord, vector: list[float] | None
    ) -> bool:
        inserted = self._conn.execute(
            memory_sql.insert_sql(memory_type), memory_sql.record_row(memory_type, record)
        ).fetchall()
        if not inserted:
            return False  # the erase fence's trigger dropped it
        rowid = inserted[0][0]
        self._conn.execute(
            f"INSERT INTO {memory_sql.table(memory_type)}_fts (rowid, text) VALUES (?, ?)",
            (rowid, record.text),
        )
        if vector is not None and record.embedding_model_id is not None:
            self.insert_vector(memory_type, record.embedding_model_id, rowid, vector)
        return True

    def supersede_memory(self, memory_type: str, memory_id: str) -> int:
        """Mark the old version superseded (it is kept, vector included); returns its version."""
        table = memory_sql.table(memory_type)
        rowid, version, model_id = self._conn.execute(
            f"UPDATE {table} SET status = 'superseded', updated_at = ? WHERE id = ? "
            "RETURNING rowid, version, embedding_model_id",
            (now_text(), memory_id),
        ).fetchall()[0]
        if model_id is not None:
            self._conn.execute(
                f"UPDATE {memory_sql.vector_table(memory_type, model_id)} "
                "SET status = 'superseded' WHERE memory_rowid = ?",
                (rowid,),
            )
        return version

    def reinforce_memory(self, memory_type: str, memory_id: str, snapshot_id: str) -> int:
        """One more restatement, the snapshot merged into the evidence (once); returns the
        record's version."""
        table = memory_sql.table(memory_type)
        self._conn.execute(
            f"UPDATE {table} SET reinforcement_count = reinforcement_count + 1, "
            "evidence = json_insert(evidence, '$[#]', ?), updated_at = ? WHERE id = ? "
            "AND NOT EXISTS (SELECT 1 FROM json_each(evidence) WHERE value = ?)",
            (snapshot_id, now_text(), memory_id, snapshot_id),
        )
        return self._rows(f"SELECT version FROM {table} WHERE id = ?", (memory_id,))[0][0]

    def get_memory(self, memory_type: str, memory_id: str) -> dict[str, Any] | None:
        names = (*memory_sql.COMMON, *memory_sql.SPECIFIC[memory_type])
        rows = self._rows(
            f"SELECT {', '.join(names)} FROM {memory_sql.table(memory_type)} WHERE id = ?",
            (memory_id,),
        )
        return sql.from_sql_row(BUNDLE_MODELS[memory_type], names, rows[0]) if rows else None
