"""The SQLite store's extraction side: work selection, extraction states, failures, long-term
memories (table, FTS5, sqlite-vec), reconciliation candidates and the audit log."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import apsw
import numpy as np
import orjson

from mempipe.adapters.store.sqlite import memory_sql, search_sql, sql
from mempipe.adapters.store.sqlite.exceptions import translate
from mempipe.domain.reconcile import Candidate
from mempipe.domain.scope import Scope
from mempipe.errors import StoreError
from mempipe.schemas.audit import AuditRow
from mempipe.schemas.failure import Failure
from mempipe.schemas.memory import KEY_FIELDS, MemoryRecord
from mempipe.schemas.search import ReadFilter
from mempipe.schemas.selection import SnapshotSelection
from mempipe.schemas.snapshot import ExtractionStatus
from mempipe.schemas.transcript import SnapshotContent, TurnLine
from mempipe.schemas.work import WorkItem


def now_text() -> str:
    return sql.iso(datetime.now(UTC)) or ""


def blob(vector: list[float]) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


class SqliteExtractionOps:
    """Mixed into :class:`SqliteStore`; uses its connection and error translation."""

    url: str
    _conn: apsw.Connection
    partition_keys: tuple[str, ...] = ()

    def _rows(self, query: str, bindings: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    @contextmanager
    def write_transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE: the write lock is held from the first read, so a read-decide-write
        (reconciliation) is never interleaved with another writer's."""
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        try:
            self._conn.execute("COMMIT")
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc

    def extraction_work(
        self, selection: SnapshotSelection, handlers: Sequence[str], *, force: bool
    ) -> list[WorkItem]:
        if not handlers:
            return []
        where, values = sql.selection_where(selection)
        now = now_text()
        try:
            with self._conn:
                for handler in handlers:
                    self._conn.execute(
                        "INSERT INTO snapshot_extractions (snapshot_id, handler, status, "
                        f"attempts, updated_at) SELECT s.id, ?, 'pending', 0, ? FROM snapshots s "
                        f"WHERE {where} ON CONFLICT DO NOTHING",
                        (handler, now, *values),
                    )
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc
        states = "" if force else "AND e.status IN ('pending', 'failed_retryable')"
        marks = ", ".join("?" for _ in handlers)
        rows = self._rows(
            "SELECT s.id, e.handler, e.attempts, s.org_id, s.project_id, s.user_id "
            "FROM snapshots s JOIN snapshot_extractions e "
            f"ON e.snapshot_id = s.id WHERE {where} AND e.handler IN ({marks}) {states} "
            "ORDER BY coalesce(s.started_at, s.created_at), s.session_id, s.first_turn_seq, "
            "e.handler",
            (*values, *handlers),
        )
        return [
            WorkItem(
                snapshot_id=r[0],
                handler=r[1],
                attempts=r[2],
                org_id=r[3],
                project_id=r[4],
                user_id=r[5],
            )
            for r in rows
        ]

    def snapshot_content(self, snapshot_id: str) -> SnapshotContent:
        head = self._rows(
            "SELECT org_id, project_id, user_id, agent_id, session_id, first_turn_seq, "
            "last_turn_seq FROM snapshots WHERE id = ?",
            (snapshot_id,),
        )
        if not head:
            raise StoreError(f"no snapshot {snapshot_id!r}")
        org, project, user, agent, session, first, last = head[0]
        turns = self._rows(
            "SELECT role, content, created_at FROM turns WHERE org_id = ? AND project_id = ? "
            "AND coalesce(user_id, '') = coalesce(?, '') AND session_id = ? "
            "AND turn_seq BETWEEN ? AND ? ORDER BY turn_seq",
            (org, project, user, session, first, last),
        )
        return SnapshotContent(
            snapshot_id=snapshot_id,
            org_id=org,
            project_id=project,
            user_id=user,
            agent_id=agent,
            session_id=session,
            turns=[TurnLine(role=r, content=c, created_at=sql.parse_iso(t)) for r, c, t in turns],
        )

    def snapshot_times(self, snapshot_ids: Sequence[str]) -> dict[str, datetime]:
        if not snapshot_ids:
            return {}
        marks = ", ".join("?" for _ in snapshot_ids)
        return {
            snapshot_id: sql.parse_iso(at)
            for snapshot_id, at in self._rows(
                f"SELECT id, coalesce(started_at, created_at) FROM snapshots WHERE id IN ({marks})",
                list(snapshot_ids),
            )
            if at is not None
        }

    def rule_summarized(self, snapshot_ids: Sequence[str]) -> list[str]:
        """Those of the snapshots whose summary is still the deterministic one."""
        marks = ", ".join("?" for _ in snapshot_ids)
        return [
            row[0]
            for row in self._rows(
                f"SELECT id FROM snapshots WHERE id IN ({marks}) AND summary_source = 'rules'",
                list(snapshot_ids),
            )
        ]

    def set_snapshot_summary(self, snapshot_id: str, summary: str, source: str) -> None:
        try:
            with self._conn:
                self._conn.execute(
                    "UPDATE snapshots SET summary = ?, summary_source = ? WHERE id = ?",
                    (summary, source, snapshot_id),
                )
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc

    def set_extraction_state(
        self,
        snapshot_id: str,
        handler: str,
        status: ExtractionStatus,
        attempts: int,
        error: str | None = None,
    ) -> None:
        try:
            with self._conn:
                self._conn.execute(
                    "UPDATE snapshot_extractions SET status = ?, attempts = ?, last_error = ?, "
                    "updated_at = ?, claimed_by = NULL, claimed_until = NULL "
                    "WHERE snapshot_id = ? AND handler = ?",
                    (status.value, attempts, error, now_text(), snapshot_id, handler),
                )
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc

    def record_failure(self, failure: Failure) -> None:
        row = failure.model_dump(mode="json")
        columns = list(row)
        try:
            with self._conn:
                self._conn.execute(
                    f"INSERT INTO failures ({', '.join(columns)}) "
                    f"VALUES ({', '.join('?' for _ in columns)})",
                    [row[c] for c in columns],
                )
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc

    def ensure_vector_table(self, memory_type: str, model_id: str, dimensions: int) -> str:
        """The vector table new memories of a collection are written to. The first model of a
        collection starts serving it; a write with any other model than the serving one is
        refused, naming both (a model change goes through ``mempipe reembed``)."""
        serving = self._rows(
            "SELECT model_id, dimensions FROM embedding_registry "
            "WHERE collection = ? AND state = 'serving'",
            (memory_type,),
        )
        if serving and (serving[0][0], serving[0][1]) != (model_id, dimensions):
            raise StoreError(
                f"{memory_type} is indexed with {serving[0][0]} ({serving[0][1]} dimensions); "
                f"refusing vectors of {model_id} ({dimensions} dimensions): change models with "
                f"`mempipe reembed --model {model_id}`"
            )
        if not serving:
            self.register_model(memory_type, model_id, dimensions, "serving")
        return memory_sql.vector_table(memory_type, model_id)

    def register_model(self, collection: str, model_id: str, dimensions: int, state: str) -> str:
        name = memory_sql.vector_table(collection, model_id)
        registered = self._rows(
            "SELECT dimensions FROM embedding_registry WHERE collection = ? AND model_id = ?",
            (collection, model_id),
        )
        if registered and registered[0][0] != dimensions:
            raise StoreError(
                f"{collection}: model {model_id} is registered with {registered[0][0]} "
                f"dimensions, not {dimensions}"
            )
        if not registered:
            with self._conn:
                columns = memory_sql.declared_filters(collection, self.partition_keys)
                self._conn.execute(memory_sql.vector_table_ddl(name, dimensions, columns))
                # Workers of one run may register the same model at once: one row wins.
                self._conn.execute(
                    "INSERT INTO embedding_registry (collection, model_id, dimensions, "
                    "vector_table, state, created_at) VALUES (?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (collection, model_id) DO NOTHING",
                    (collection, model_id, dimensions, name, state, now_text()),
                )
        return name

    def memory_candidates(
        self,
        memory_type: str,
        scope: Scope,
        key: str | None,
        vector: list[float] | None,
        model_id: str | None,
        k: int,
    ) -> list[Candidate]:
        table = memory_sql.table(memory_type)
        key_column = KEY_FIELDS.get(memory_type)
        filters = ReadFilter(**scope.model_dump())
        where, values = search_sql.read_where(filters, search_sql.MEMORY_FIELDS, "m")
        found: dict[str, Candidate] = {}
        if key is not None and key_column is not None:
            for memory_id, text, evidence in self._rows(
                f"SELECT m.id, m.text, m.evidence FROM {table} m WHERE {where} "
                f"AND m.status = 'active' AND m.{key_column} = ?",
                (*values, key),
            ):
                found[memory_id] = Candidate(
                    memory_id, key, text, None, tuple(orjson.loads(evidence))
                )
        if vector is not None and model_id is not None:
            vec_table = memory_sql.vector_table(memory_type, model_id)
            constraints, filter_values = search_sql.vector_where(filters, search_sql.MEMORY_FIELDS)
            key_select = f"m.{key_column}" if key_column else "NULL"
            for memory_id, text, evidence, found_key, distance in self._rows(
                f"SELECT m.id, m.text, m.evidence, {key_select}, v.distance FROM "
                f"(SELECT memory_rowid, distance FROM {vec_table} WHERE embedding MATCH ? "
                f"AND k = ? AND status = 'active' AND {constraints}) v "
                f"JOIN {table} m ON m.rowid = v.memory_rowid",
                (blob(vector), k, *filter_values),
            ):
                if distance is None:
                    continue
                found[memory_id] = Candidate(
                    memory_id, found_key, text, 1.0 - distance, tuple(orjson.loads(evidence))
                )
        return list(found.values())

    def add_memory(
        self, memory_type: str, record: MemoryRecord, vector: list[float] | None
    ) -> None:
        rowid = self._conn.execute(
            memory_sql.insert_sql(memory_type), memory_sql.record_row(memory_type, record)
        ).fetchall()[0][0]
        self._conn.execute(
            f"INSERT INTO {memory_sql.table(memory_type)}_fts (rowid, text) VALUES (?, ?)",
            (rowid, record.text),
        )
        if vector is not None and record.embedding_model_id is not None:
            self.insert_vector(memory_type, record.embedding_model_id, rowid, vector)

    def vector_columns(self, collection: str, model_id: str) -> tuple[str, ...]:
        """The filter columns the vector table really has (they follow its DDL, not the
        configuration: a drifted table keeps working until it is rebuilt)."""
        sql = self._rows(
            "SELECT sql FROM sqlite_master WHERE name = ?",
            (memory_sql.vector_table(collection, model_id),),
        )
        if not sql:
            raise StoreError(f"{collection}: no vector index for {model_id}")
        return memory_sql.parse_vector_ddl(sql[0][0])[2]

    def insert_vector(
        self, collection: str, model_id: str, rowid: int, vector: list[float]
    ) -> bool:
        """Insert one record's vector with its filter values, unless it has one already."""
        return bool(self.insert_vectors(collection, model_id, [(rowid, vector)]))

    def insert_vectors(
        self, collection: str, model_id: str, vectors: Sequence[tuple[int, list[float]]]
    ) -> list[int]:
        """Insert vectors with their records' filter values, skipping records that have one;
        returns the rowids written. Runs in the caller's transaction."""
        source, _ = memory_sql.source_table(collection)
        table = memory_sql.vector_table(collection, model_id)
        columns = self.vector_columns(collection, model_id)
        values = memory_sql.filter_values_sql(collection, columns)
        written = self._conn.executemany(
            f"INSERT INTO {table} (memory_rowid, embedding, {', '.join(columns)}) "
            f"SELECT s.rowid, ?, {values} FROM {source} s WHERE s.rowid = ? "
            f"AND NOT EXISTS (SELECT 1 FROM {table} v WHERE v.memory_rowid = ?) "
            "RETURNING memory_rowid",
            [(blob(vector), rowid, rowid) for rowid, vector in vectors],
        )
        return [row[0] for row in written]

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
        return dict(zip(names, rows[0], strict=True)) if rows else None

    def insert_audit(self, rows: Sequence[AuditRow]) -> None:
        if not rows:
            return
        columns = list(AuditRow.model_fields)
        self._conn.executemany(
            f"INSERT INTO audit ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
            [[sql.to_sql(getattr(r, c)) for c in columns] for r in rows],
        )

    def audit_rows(
        self, run_id: str | None = None, since: str | None = None, until: str | None = None
    ) -> Iterator[AuditRow]:
        clauses, values = ["1 = 1"], []
        for clause, value in (("run_id = ?", run_id), ("day >= ?", since), ("day <= ?", until)):
            if value:
                clauses.append(clause)
                values.append(value)
        columns = list(AuditRow.model_fields)
        cursor = self._conn.cursor().execute(
            f"SELECT {', '.join(columns)} FROM audit WHERE {' AND '.join(clauses)} ORDER BY id",
            values,
        )
        for row in cursor:
            yield AuditRow.model_validate(dict(zip(columns, row, strict=True)))

    def failure_counts(
        self, run_id: str | None = None, since: str | None = None, until: str | None = None
    ) -> dict[str, int]:
        clauses, values = ["1 = 1"], []
        for clause, value in (
            ("run_id = ?", run_id),
            ("substr(at, 1, 10) >= ?", since),
            ("substr(at, 1, 10) <= ?", until),
        ):
            if value:
                clauses.append(clause)
                values.append(value)
        counts = {"environmental": 0, "content": 0}
        counts.update(
            dict(
                self._rows(
                    f"SELECT failure_class, count(*) FROM failures WHERE {' AND '.join(clauses)} "
                    "GROUP BY 1",
                    values,
                )
            )
        )
        return counts
