"""The SQLite store's embedding side: the registry of (collection, model) vector tables and the
blue/green steps of a model change (fill beside, verify, switch atomically, finalize or roll
back)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from mempipe.adapters.store.sqlite import memory_sql
from mempipe.adapters.store.sqlite.exceptions import translate
from mempipe.errors import StoreError
from mempipe.schemas.embedding import ModelState, RegistryEntry


class SqliteEmbeddingOps:
    url: str
    _conn: apsw.Connection

    def _rows(self, query: str, bindings: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def insert_vectors(
        self, collection: str, model_id: str, vectors: Sequence[tuple[int, list[float]]]
    ) -> list[int]:
        raise NotImplementedError

    def registry(self) -> list[RegistryEntry]:
        return [
            RegistryEntry(
                collection=c, model_id=m, dimensions=d, state=ModelState(s), vector_table=t
            )
            for c, m, d, s, t in self._rows(
                "SELECT collection, model_id, dimensions, state, vector_table "
                "FROM embedding_registry ORDER BY collection, created_at"
            )
        ]

    def record_id_bounds(self, collection: str) -> tuple[int, int] | None:
        source, _ = memory_sql.source_table(collection)
        low, high = self._rows(f"SELECT min(rowid), max(rowid) FROM {source}")[0]
        return None if low is None else (low, high)

    def records_missing_vectors(
        self,
        collection: str,
        model_id: str,
        after_rowid: int,
        limit: int,
        until_rowid: int | None = None,
    ) -> list[tuple[int, str]]:
        """Records (every version, superseded included) without a vector of ``model_id``."""
        source, text = memory_sql.source_table(collection)
        vectors = memory_sql.vector_table(collection, model_id)
        return self._rows(
            f"SELECT s.rowid, s.{text} FROM {source} s WHERE s.rowid > ? AND s.rowid <= ? "
            f"AND NOT EXISTS (SELECT 1 FROM {vectors} v WHERE v.memory_rowid = s.rowid) "
            "ORDER BY s.rowid LIMIT ?",
            (after_rowid, until_rowid if until_rowid is not None else 2**63 - 1, limit),
        )

    def store_vectors(
        self, collection: str, model_id: str, vectors: Sequence[tuple[int, list[float]]]
    ) -> int:
        """Write vectors beside whatever else exists, each with its record's filter values; a
        record that already has one keeps it (a resumed run adds exactly what is missing)."""
        source, _ = memory_sql.source_table(collection)
        serving = self._serving(collection) == model_id
        try:
            with self._conn:
                written = self.insert_vectors(collection, model_id, vectors)
                if written and serving and collection != "stm":
                    self._conn.executemany(
                        f"UPDATE {source} SET has_embedding = 1, embedding_model_id = ? "
                        "WHERE rowid = ?",
                        [(model_id, rowid) for rowid in written],
                    )
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc
        return len(written)

    def vector_counts(self, collection: str, model_id: str) -> tuple[int, int]:
        """(records, records with a vector of ``model_id``)."""
        source, _ = memory_sql.source_table(collection)
        table = memory_sql.vector_table(collection, model_id)
        records = self._rows(f"SELECT count(*) FROM {source}")[0][0]
        vectors = self._rows(f"SELECT count(*) FROM {table}")[0][0]
        return records, vectors

    def wait_searchable(self, collections: Sequence[str], model_id: str) -> None:
        """Nothing to wait for: sqlite-vec tables are written and searched in one database."""

    def switch_models(self, collections: Sequence[str], model_id: str) -> None:
        """In one transaction, for every collection: the serving model becomes previous (kept),
        ``model_id`` starts serving, and each memory's ``has_embedding`` follows the new model.
        Search answers with the old model up to the commit and the new one from it."""
        try:
            with self._conn:
                for collection in collections:
                    self._set_serving(collection, model_id, demote_to=ModelState.PREVIOUS)
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc

    def rollback_models(self, collections: Sequence[str]) -> list[str]:
        """Restore the previous model where one is kept; the newer vectors are dropped, and so
        are the vectors of a move that never switched (a failed or abandoned re-embed)."""
        restored = []
        try:
            with self._conn:
                for collection in collections:
                    previous = self._in_state(collection, ModelState.PREVIOUS)
                    if previous is None:
                        while building := self._in_state(collection, ModelState.BUILDING):
                            self._drop(collection, building)
                            restored.append(collection)
                        continue
                    current = self._serving(collection)
                    self._set_serving(collection, previous, demote_to=ModelState.BUILDING)
                    if current is not None:
                        self._drop(collection, current)
                    restored.append(collection)
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc
        return restored

    def finalize_models(self, collections: Sequence[str]) -> list[str]:
        """Drop the vectors of previous models: a rollback is no longer possible."""
        dropped = []
        try:
            with self._conn:
                for collection in collections:
                    previous = self._in_state(collection, ModelState.PREVIOUS)
                    if previous is not None:
                        self._drop(collection, previous)
                        dropped.append(f"{collection}:{previous}")
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc
        return dropped

    def _serving(self, collection: str) -> str | None:
        return self._in_state(collection, ModelState.SERVING)

    def _in_state(self, collection: str, state: ModelState) -> str | None:
        rows = self._rows(
            "SELECT model_id FROM embedding_registry WHERE collection = ? AND state = ?",
            (collection, state.value),
        )
        return rows[0][0] if rows else None

    def _set_serving(self, collection: str, model_id: str, demote_to: ModelState) -> None:
        if not self._rows(
            "SELECT 1 FROM embedding_registry WHERE collection = ? AND model_id = ?",
            (collection, model_id),
        ):
            raise StoreError(f"{collection}: no vectors of {model_id} to switch to")
        self._conn.execute(
            "UPDATE embedding_registry SET state = ? WHERE collection = ? AND state = 'serving'",
            (demote_to.value, collection),
        )
        self._conn.execute(
            "UPDATE embedding_registry SET state = 'serving' WHERE collection = ? AND model_id = ?",
            (collection, model_id),
        )
        if collection != "stm":
            source = memory_sql.table(collection)
            table = memory_sql.vector_table(collection, model_id)
            self._conn.execute(
                f"UPDATE {source} SET embedding_model_id = CASE WHEN has THEN ? END, "
                "has_embedding = has FROM (SELECT s.rowid AS rid, EXISTS (SELECT 1 FROM "
                f"{table} v WHERE v.memory_rowid = s.rowid) AS has FROM {source} s) "
                f"WHERE {source}.rowid = rid",
                (model_id,),
            )

    def _drop(self, collection: str, model_id: str) -> None:
        self._conn.execute(f"DROP TABLE IF EXISTS {memory_sql.vector_table(collection, model_id)}")
        self._conn.execute(
            "DELETE FROM embedding_registry WHERE collection = ? AND model_id = ?",
            (collection, model_id),
        )
