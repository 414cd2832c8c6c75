"""The SQLite store's retention role: what a policy expires (:mod:`retention_sql`, one query for
the plan, the run and the reads), and its forgetting, batch by batch, each batch one
transaction: the records with their text-index entries and vectors, the audit's text of them,
their evidence fenced from replay, a ``FORGET`` audit row each."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

import orjson

from mempipe.adapters.store.sqlite import memory_sql, retention_sql, sql
from mempipe.adapters.store.sqlite.base import SqliteParts
from mempipe.schemas.audit import ReconcileAction
from mempipe.schemas.bundle import REDACTED
from mempipe.schemas.embedding import RegistryEntry
from mempipe.schemas.retention import (
    RETAINED,
    TURNS,
    Expiry,
    ForgetCount,
    forget_counts,
    retained_of,
    source_of,
)
from mempipe.schemas.search import Hit

QUEUE = "temp.forget_queue"
BATCH = "temp.forget_batch"
INSIDE = f"(SELECT rowid FROM {BATCH})"


class SqliteRetention(SqliteParts):
    """Forgetting by policy."""

    registry: Callable[[], list[RegistryEntry]]

    def expired_counts(self, expiry: Expiry) -> list[ForgetCount]:
        counts = []
        for collection in RETAINED:
            asked = retention_sql.expired_sql(collection, expiry)
            if asked is None:
                continue
            table = retention_sql.table_of(collection)
            query, values = asked
            grouped = self._rows(
                f"SELECT r.org_id, r.project_id, r.user_id, x.rule, count(*) FROM ({query}) x "
                f"JOIN {table} r ON r.rowid = x.rowid GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
                values,
            )
            counts += forget_counts(collection, grouped)
        return counts

    def queue_expired(self, expiry: Expiry, collection: str) -> int:
        """What the policy expires in ``collection`` now, held for :meth:`forget_queued` on this
        connection; a rerun after a kill queues again what is left."""
        self._conn.execute(
            f"CREATE TABLE IF NOT EXISTS {QUEUE} (rowid INTEGER PRIMARY KEY, rule TEXT NOT NULL)"
        )
        self._conn.execute(f"DELETE FROM {QUEUE}")
        asked = retention_sql.expired_sql(collection, expiry)
        if asked is None:
            return 0
        query, values = asked
        self._conn.execute(f"INSERT OR IGNORE INTO {QUEUE} (rowid, rule) {query}", values)
        return int(self._rows(f"SELECT count(*) FROM {QUEUE}")[0][0])

    def forget_queued(
        self, collection: str, limit: int, run_id: str, at: datetime
    ) -> list[ForgetCount]:
        """Forget up to ``limit`` of the queued records, in one transaction; what went, per
        owner and rule (nothing when none are left). Set-based: the batch is a table of its
        own, and every step one statement over it."""
        self._conn.execute(f"CREATE TABLE IF NOT EXISTS {BATCH} (rowid INTEGER PRIMARY KEY)")
        self._conn.execute("PRAGMA secure_delete = ON")
        turns = collection == TURNS
        table, key = retention_sql.table_of(collection), retention_sql.key_of(collection)
        with self._writing():
            self._conn.execute(f"DELETE FROM {BATCH}")
            self._conn.execute(
                f"INSERT INTO {BATCH} SELECT rowid FROM {QUEUE} ORDER BY rowid LIMIT ?", (limit,)
            )
            chosen = f"FROM {table} r JOIN {QUEUE} q ON q.rowid = r.rowid WHERE r.rowid IN {INSIDE}"
            counts = self._rows(
                f"SELECT r.org_id, r.project_id, r.user_id, q.rule, count(*) {chosen} "
                "GROUP BY 1, 2, 3, 4"
            )
            if not counts:
                return []
            self._conn.execute(
                "INSERT INTO audit (run_id, at, day, org_id, project_id, user_id, agent_id, "
                "memory_type, action, memory_id, version, snapshot_id, text, rule) "
                f"SELECT ?, ?, ?, r.org_id, r.project_id, r.user_id, r.agent_id, ?, ?, {key}, "
                f"{'1' if turns else 'r.version'}, {'r.snapshot_id' if turns else 'NULL'}, '', "
                f"q.rule {chosen}",
                (
                    run_id,
                    sql.iso(at),
                    at.date().isoformat(),
                    collection,
                    ReconcileAction.FORGET.value,
                ),
            )
            if turns:
                self._forget_turns(at)
            else:
                self._forget_memories(collection, at)
            for entry in self.registry():
                if entry.collection == source_of(collection) and self._rows(
                    "SELECT 1 FROM sqlite_master WHERE name = ?", (entry.vector_table,)
                ):
                    self._conn.execute(
                        f"DELETE FROM {entry.vector_table} WHERE memory_rowid IN {INSIDE}"
                    )
            self._conn.execute(f"DELETE FROM {table} WHERE rowid IN {INSIDE}")
            self._conn.execute(f"DELETE FROM {QUEUE} WHERE rowid IN {INSIDE}")
        return forget_counts(collection, counts)

    def _forget_turns(self, at: datetime) -> None:
        """The batch's text-index entries out; a snapshot left without turns emptied, and
        fenced whole from replay."""
        self._conn.execute(
            "INSERT INTO turns_fts (turns_fts, rowid, name, content) "
            f"SELECT 'delete', id, name, content FROM turns WHERE id IN {INSIDE}"
        )
        emptied = self._rows(  # by the turns' key, which is indexed (their snapshot_id is not)
            "SELECT s.id FROM snapshots s WHERE s.id IN (SELECT DISTINCT snapshot_id FROM turns "
            f"WHERE id IN {INSIDE}) AND NOT EXISTS (SELECT 1 FROM turns t WHERE "
            "t.org_id = s.org_id AND t.project_id = s.project_id "
            "AND coalesce(t.user_id, '') = coalesce(s.user_id, '') "
            "AND t.session_id = s.session_id "
            f"AND t.turn_seq BETWEEN s.first_turn_seq AND s.last_turn_seq AND t.id NOT IN {INSIDE})"
        )
        self._conn.executemany("UPDATE snapshots SET summary = '' WHERE id = ?", emptied)
        self._fence(emptied, "*", at)

    def _forget_memories(self, collection: str, at: datetime) -> None:
        """The batch's text-index entries out, its memories' earlier audit text redacted, the
        snapshots that taught them fenced from replay for this type."""
        table = memory_sql.table(collection)
        self._conn.execute(
            f"INSERT INTO {table}_fts ({table}_fts, rowid, text) "
            f"SELECT 'delete', rowid, text FROM {table} WHERE rowid IN {INSIDE}"
        )
        self._conn.execute(
            "UPDATE audit SET text = ? WHERE memory_type = ? AND text NOT IN (?, '') "
            f"AND memory_id IN (SELECT id FROM {table} WHERE rowid IN {INSIDE})",
            (REDACTED, collection, REDACTED),
        )
        evidence = self._rows(
            f"SELECT DISTINCT j.value FROM {table} r, json_each(r.evidence) j "
            f"WHERE r.rowid IN {INSIDE}"
        )
        self._fence(evidence, collection, at)

    def _fence(self, snapshots: Sequence[tuple[str]], handler: str, at: datetime) -> None:
        self._conn.executemany(
            "INSERT OR IGNORE INTO forgotten_evidence (snapshot_id, handler, forgotten_at) "
            "VALUES (?, ?, ?)",
            [(s, handler, sql.iso(at)) for (s,) in snapshots],
        )

    def forgotten_memories(self) -> set[tuple[str, str]]:
        return {
            (kind, memory_id)
            for kind, memory_id in self._rows(
                "SELECT DISTINCT memory_type, memory_id FROM audit "
                "WHERE action = 'FORGET' AND memory_type != ?",
                (TURNS,),
            )
        }

    def expired_among(self, source: str, hits: Sequence[Hit], expiry: Expiry) -> set[str]:
        """The ids of those ``hits`` the policy expires (each ranked among all its owner's
        records), so a search leaves them out before tonight's run forgets them."""
        collection = retained_of(source)
        if not hits or collection not in RETAINED:
            return set()
        owners = sorted({h.user_id for h in hits}, key=str)
        asked = retention_sql.expired_sql(collection, expiry, owners)
        if asked is None:
            return set()
        query, values = asked
        key, table = retention_sql.key_of(collection), retention_sql.table_of(collection)
        ids = orjson.dumps([h.id for h in hits]).decode()
        return {
            row[0]
            for row in self._rows(
                f"SELECT {key} FROM ({query}) x JOIN {table} r ON r.rowid = x.rowid "
                f"WHERE {key} IN (SELECT value FROM json_each(?))",
                [*values, ids],
            )
        }
