"""The SQLite store's vectors role: one sqlite-vec table per (collection, model), written beside
the records with their filter values."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import orjson

from mempipe.adapters.store.sqlite import memory_sql
from mempipe.adapters.store.sqlite.base import SqliteParts, blob, now_text
from mempipe.adapters.store.sqlite.search import hit_of_row
from mempipe.errors import StoreError
from mempipe.schemas.embedding import ModelRegistration
from mempipe.schemas.indexes import Quantization
from mempipe.schemas.reembed import SampledRecord


class SqliteVectors(SqliteParts):
    """Vector tables and the records they lack."""

    serving_model: Callable[[str], str | None]

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
            first = ModelRegistration(
                collection=memory_type, model_id=model_id, dimensions=dimensions, state="serving"
            )
            self.register_model(first)
        return memory_sql.vector_table(memory_type, model_id)

    def register_model(self, registration: ModelRegistration) -> str:
        name = memory_sql.vector_table(registration.collection, registration.model_id)
        registered = self._rows(
            "SELECT dimensions FROM embedding_registry WHERE collection = ? AND model_id = ?",
            (registration.collection, registration.model_id),
        )
        if registered and registered[0][0] != registration.dimensions:
            raise StoreError(
                f"{registration.collection}: model {registration.model_id} is registered with "
                f"{registered[0][0]} dimensions, not {registration.dimensions}"
            )
        if not registered:
            with self._writing():
                columns = memory_sql.declared_filters(registration.collection, self.partition_keys)
                self._conn.execute(
                    memory_sql.vector_table_ddl(
                        name,
                        registration.dimensions,
                        columns,
                        self.quantization[registration.collection],
                    )
                )
                # Workers of one run may register the same model at once: one row wins.
                self._conn.execute(
                    "INSERT INTO embedding_registry (collection, model_id, dimensions, "
                    "vector_table, state, created_at, options) VALUES (?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (collection, model_id) DO NOTHING",
                    (
                        registration.collection,
                        registration.model_id,
                        registration.dimensions,
                        name,
                        registration.state.value,
                        now_text(),
                        None
                        if registration.options is None
                        else registration.options.model_dump_json(),
                    ),
                )
        return name

    def vector_columns(self, collection: str, model_id: str) -> tuple[str, ...]:
        """The filter columns the vector table really has (they follow its DDL, not the
        configuration: a drifted table keeps working until it is rebuilt)."""
        return self._vector_shape(collection, model_id).columns

    def _vector_shape(self, collection: str, model_id: str) -> memory_sql.VectorShape:
        shape = self._table_shape(memory_sql.vector_table(collection, model_id))
        if shape is None:
            raise StoreError(f"{collection}: no vector index for {model_id}")
        return shape

    def insert_vector(
        self, collection: str, model_id: str, rowid: int, vector: list[float]
    ) -> bool:
        """Insert one record's vector with its filter values, unless it has one already."""
        return bool(self.insert_vectors(collection, model_id, [(rowid, vector)]))

    def insert_vectors(
        self, collection: str, model_id: str, vectors: Sequence[tuple[int, list[float]]]
    ) -> list[int]:
        """Insert vectors with their records' filter values (and their quantized copy, where the
        table has one), skipping records that have one; returns the rowids written. Runs in the
        caller's transaction."""
        source, _ = memory_sql.source_table(collection)
        table = memory_sql.vector_table(collection, model_id)
        shape = self._vector_shape(collection, model_id)
        values = memory_sql.filter_values_sql(collection, shape.columns)
        names = ", ".join(shape.columns)
        if shape.quantization is Quantization.NONE:
            written = self._conn.executemany(
                f"INSERT INTO {table} (memory_rowid, embedding, {names}) "
                f"SELECT s.rowid, ?, {values} FROM {source} s WHERE s.rowid = ? "
                f"AND NOT EXISTS (SELECT 1 FROM {table} v WHERE v.memory_rowid = ?) "
                "RETURNING memory_rowid",
                [(blob(vector), rowid, rowid) for rowid, vector in vectors],
            )
            return [row[0] for row in written]
        return self._insert_quantized(table, source, shape.quantization, values, names, vectors)

    def _insert_quantized(
        self,
        table: str,
        source: str,
        quantization: Quantization,
        values: str,
        names: str,
        vectors: Sequence[tuple[int, list[float]]],
    ) -> list[int]:
        """sqlite-vec knows a quantized value by its SQLite subtype, which a statement that also
        reads the table (``NOT EXISTS``) or returns rows loses: the vectors present are looked up
        first, and each insert is counted by its changes."""
        present = {
            row[0]
            for row in self._conn.execute(
                f"SELECT c.value FROM json_each(?) c JOIN {table} v ON v.memory_rowid = c.value",
                (orjson.dumps([rowid for rowid, _ in vectors]).decode(),),
            )
        }
        insert = (
            f"INSERT INTO {table} (memory_rowid, embedding, {memory_sql.QUANTIZED}, {names}) "
            f"SELECT s.rowid, ?, {memory_sql.quantize_sql(quantization)}, {values} "
            f"FROM {source} s WHERE s.rowid = ?"
        )
        written = []
        for rowid, vector in vectors:
            if rowid in present:
                continue
            self._conn.execute(insert, (blob(vector), blob(vector), rowid))
            if self._conn.changes():
                written.append(rowid)
                present.add(rowid)
        return written

    def record_id_bounds(self, collection: str) -> tuple[int, int] | None:
        source, _ = memory_sql.source_table(collection)
        low, high = self._rows(f"SELECT min(rowid), max(rowid) FROM {source}")[0]
        return None if low is None else (low, high)

    def records_missing_vectors(
        self, collection: str, model_id: str, after_id: int, limit: int, until_id: int | None = None
    ) -> list[tuple[int, str]]:
        """Records (every version, superseded included) without a vector of ``model_id``:
        every record, for a model not registered yet."""
        source, text = memory_sql.source_table(collection)
        vectors = memory_sql.vector_table(collection, model_id)
        missing = (
            f"AND NOT EXISTS (SELECT 1 FROM {vectors} v WHERE v.memory_rowid = s.rowid) "
            if self._rows("SELECT 1 FROM sqlite_master WHERE name = ?", (vectors,))
            else ""
        )
        return self._rows(
            f"SELECT s.rowid, {text} FROM {source} s WHERE s.rowid > ? AND s.rowid <= ? "
            f"{missing}ORDER BY s.rowid LIMIT ?",
            (after_id, until_id if until_id is not None else 2**63 - 1, limit),
        )

    def set_vectors(
        self, collection: str, model_id: str, vectors: Sequence[tuple[int, list[float]]]
    ) -> int:
        """Write vectors beside whatever else exists, each with its record's filter values; a
        record that already has one keeps it (a resumed run adds exactly what is missing)."""
        source, _ = memory_sql.source_table(collection)
        serving = self.serving_model(collection) == model_id
        with self._writing():
            written = self.insert_vectors(collection, model_id, vectors)
            if written and serving and collection != "stm":
                self._conn.executemany(
                    f"UPDATE {source} SET has_embedding = 1, embedding_model_id = ? "
                    "WHERE rowid = ?",
                    [(model_id, rowid) for rowid in written],
                )
        return len(written)

    def record_refs(
        self, collection: str, after_id: int, limit: int
    ) -> list[tuple[int, str, str | None]]:
        if collection == "stm":
            query = (
                "SELECT id, session_id || '#' || turn_seq, message_id FROM turns WHERE id > ? "
                "ORDER BY id LIMIT ?"
            )
        else:
            query = (
                f"SELECT rowid, id, NULL FROM {memory_sql.table(collection)} WHERE rowid > ? "
                "ORDER BY rowid LIMIT ?"
            )
        return self._rows(query, (after_id, limit))

    def sampled_records(
        self, collection: str, model_id: str | None, rowids: Sequence[int]
    ) -> list[SampledRecord]:
        """The rows by id, their hit's columns as a search reads them, then each one's vector
        looked up by its record id (the vector table's key)."""
        source, text = memory_sql.source_table(collection)
        hit_columns = (
            "s.session_id || '#' || s.turn_seq, s.content, s.org_id, s.project_id, s.user_id, "
            "s.agent_id, s.session_id, NULL, s.message_id, s.name, 1"
            if collection == "stm"
            else "s.id, s.text, s.org_id, s.project_id, s.user_id, s.agent_id, s.session_id, "
            "s.visibility, NULL, NULL, s.status = 'active'"
        )
        rows = self._rows(
            f"SELECT s.rowid, {text}, {hit_columns} FROM json_each(?) AS chosen "
            f"CROSS JOIN {source} s ON s.rowid = chosen.value",
            (orjson.dumps(list(rowids)).decode(),),
        )
        table = memory_sql.vector_table(collection, model_id) if model_id else None
        if table and not self._rows("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)):
            table = None
        sampled = []
        for row in rows:
            found = (
                self._rows(f"SELECT embedding FROM {table} WHERE memory_rowid = ?", (row[0],))
                if table
                else []
            )
            sampled.append(
                SampledRecord(
                    rowid=row[0],
                    text=row[1] or "",
                    hit=hit_of_row(collection, (*row[2:12], 0.0)),
                    searchable=bool(row[12]),
                    vector=np.frombuffer(found[0][0], dtype=np.float32).tolist() if found else None,
                )
            )
        return sampled

    def vector_counts(self, collection: str, model_id: str) -> tuple[int, int]:
        """(records, records with a vector of ``model_id``)."""
        source, _ = memory_sql.source_table(collection)
        table = memory_sql.vector_table(collection, model_id)
        records = self._rows(f"SELECT count(*) FROM {source}")[0][0]
        vectors = self._rows(f"SELECT count(*) FROM {table}")[0][0]
        return records, vectors
