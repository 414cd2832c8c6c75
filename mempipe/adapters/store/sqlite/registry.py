"""The SQLite store's registry role: which model serves each collection, and the blue/green moves
of :mod:`mempipe.domain.reembed` applied in one transaction."""

from __future__ import annotations

from collections.abc import Sequence

from mempipe.adapters.store.sqlite import memory_sql
from mempipe.adapters.store.sqlite.base import SqliteParts
from mempipe.domain.reembed import RegistryChange, finalize_plan, rollback_plan, switch_plan
from mempipe.schemas.embedding import Bridge, ModelOptions, ModelState, RegistryEntry

BRIDGE_COLUMNS = tuple(Bridge.model_fields)


class SqliteRegistry(SqliteParts):
    """The embedding registry."""

    def registry(self) -> list[RegistryEntry]:
        return [
            RegistryEntry(
                collection=c,
                model_id=m,
                dimensions=d,
                state=ModelState(s),
                vector_table=t,
                options=None if o is None else ModelOptions.model_validate_json(o),
            )
            for c, m, d, s, t, o in self._rows(
                "SELECT collection, model_id, dimensions, state, vector_table, options "
                "FROM embedding_registry ORDER BY collection, created_at"
            )
        ]

    def active_embedding(self, collection: str) -> tuple[str, int] | None:
        rows = self._rows(
            "SELECT model_id, dimensions FROM embedding_registry "
            "WHERE collection = ? AND state = 'serving'",
            (collection,),
        )
        return (rows[0][0], rows[0][1]) if rows else None

    def serving_model(self, collection: str) -> str | None:
        active = self.active_embedding(collection)
        return None if active is None else active[0]

    def bridges(self) -> list[Bridge]:
        return [
            Bridge.model_validate(dict(zip(BRIDGE_COLUMNS, row, strict=True)))
            for row in self._rows(
                f"SELECT {', '.join(BRIDGE_COLUMNS)} FROM embedding_bridges ORDER BY collection"
            )
        ]

    def keep_bridge(self, bridge: Bridge) -> None:
        """The collection's bridge, replacing the one it had."""
        values = {**bridge.model_dump(), "weights": bridge.weights}
        values["fitted_at"] = bridge.fitted_at.isoformat()
        with self._writing():
            self._conn.execute(
                f"INSERT OR REPLACE INTO embedding_bridges ({', '.join(BRIDGE_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(BRIDGE_COLUMNS))})",
                tuple(values[c] for c in BRIDGE_COLUMNS),
            )

    def wait_searchable(self, collections: Sequence[str], model_id: str) -> None:
        """Nothing to wait for: sqlite-vec tables are written and searched in one database."""

    def switch_models(self, collections: Sequence[str], model_id: str) -> None:
        """In one transaction, for every collection: the serving model becomes previous (kept),
        ``model_id`` starts serving, and each memory's ``has_embedding`` follows the new model.
        Search answers with the old model up to the commit and the new one from it. A bridge
        into the model that stops serving is retired with it."""
        with self._writing():
            for collection in collections:
                self._apply(switch_plan(collection, self._entries(collection), model_id))
                self._conn.execute(
                    "DELETE FROM embedding_bridges WHERE collection = ? AND serving_model != ?",
                    (collection, model_id),
                )

    def rollback_models(self, collections: Sequence[str]) -> list[str]:
        """Restore the previous model where one is kept; the newer vectors are dropped, and so
        are the vectors of a move that never switched (a failed or abandoned re-embed)."""
        restored = []
        with self._writing():
            for collection in collections:
                change = rollback_plan(collection, self._entries(collection))
                if change is not None:
                    self._apply(change)
                    restored.append(collection)
        return restored

    def finalize_models(self, collections: Sequence[str]) -> list[str]:
        """Drop the vectors of previous models: a rollback is no longer possible."""
        dropped = []
        with self._writing():
            for collection in collections:
                change = finalize_plan(collection, self._entries(collection))
                if change is not None:
                    self._apply(change)
                    dropped.extend(f"{collection}:{model}" for model in change.drop)
        return dropped

    def _entries(self, collection: str) -> list[RegistryEntry]:
        return [e for e in self.registry() if e.collection == collection]

    def _apply(self, change: RegistryChange) -> None:
        """Inside the caller's transaction."""
        collection = change.collection
        state = "UPDATE embedding_registry SET state = ? WHERE collection = ? AND model_id = ?"
        if change.demote_to is not None:
            for model_id in change.demoted:
                self._conn.execute(state, (change.demote_to.value, collection, model_id))
        if change.serve is not None:
            self._conn.execute(state, (ModelState.SERVING.value, collection, change.serve))
            if collection != "stm":
                self._stamp(collection, change.serve)
        for model_id in change.drop:
            self._conn.execute(
                f"DROP TABLE IF EXISTS {memory_sql.vector_table(collection, model_id)}"
            )
            self._conn.execute(
                "DELETE FROM embedding_registry WHERE collection = ? AND model_id = ?",
                (collection, model_id),
            )

    def _stamp(self, collection: str, model_id: str) -> None:
        """Each record's ``has_embedding`` / ``embedding_model_id`` follow the serving model."""
        source = memory_sql.table(collection)
        table = memory_sql.vector_table(collection, model_id)
        self._conn.execute(
            f"UPDATE {source} SET embedding_model_id = CASE WHEN has THEN ? END, "
            "has_embedding = has FROM (SELECT s.rowid AS rid, EXISTS (SELECT 1 FROM "
            f"{table} v WHERE v.memory_rowid = s.rowid) AS has FROM {source} s) "
            f"WHERE {source}.rowid = rid",
            (model_id,),
        )
