"""The SQLite store's retention role: what a policy expires (:mod:`retention_sql`, one query for
the plan, the run and the reads), and its forgetting, batch by batch, each batch one
transaction: the records with their text-index entries and vectors, the audit's text of them,
their evidence fenced from replay, a ``FORGET`` audit row each."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime

import orjson

from mempipe.adapters.store.sqlite import memory_sql, retention_sql, sql
from mempipe.adapters.store.sqlite.base import SqliteParts
from mempipe.schemas.audit import AuditRow, ReconcileAction
from mempipe.schemas.bundle import REDACTED
from mempipe.schemas.embedding import RegistryEntry
from mempipe.schemas.retention import RETAINED, TURNS, Expiry, ForgetCount
from mempipe.schemas.search import STM, Hit, collection_of

QUEUE = "temp.forget_queue"


def _vectors_of(collection: str) -> str:
    return STM if collection == TURNS else collection


class SqliteRetention(SqliteParts):
    """Forgetting by policy."""

    registry: Callable[[], list[RegistryEntry]]
    add_audit: Callable[[Sequence[AuditRow]], None]

    def expired_counts(self, expiry: Expiry) -> list[ForgetCount]:
        counts = []
        for collection in RETAINED:
            asked = retention_sql.expired_sql(collection, expiry)
            if asked is None:
                continue
            table = "turns" if collection == TURNS else memory_sql.table(collection)
            query, values = asked
            for org, project, user, rule, records in self._rows(
                f"SELECT r.org_id, r.project_id, r.user_id, x.rule, count(*) FROM ({query}) x "
                f"JOIN {table} r ON r.rowid = x.rowid GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
                values,
            ):
                counts.append(
                    ForgetCount(
                        org_id=org,
                        project_id=project,
                        user_id=user,
                        collection=collection,
                        rule=rule,
                        records=records,
                    )
                )
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
        owner and rule (nothing when none are left)."""
        batch = self._rows(f"SELECT rowid, rule FROM {QUEUE} ORDER BY rowid LIMIT ?", (limit,))
        if not batch:
            return []
        rules = dict(batch)
        rowids = orjson.dumps(list(rules)).decode()
        self._conn.execute("PRAGMA secure_delete = ON")
        with self._writing():
            if collection == TURNS:
                rows = self._forget_turns(rowids, rules, run_id, at)
            else:
                rows = self._forget_memories(collection, rowids, rules, run_id, at)
            for entry in self.registry():
                if entry.collection == _vectors_of(collection) and self._rows(
                    "SELECT 1 FROM sqlite_master WHERE name = ?", (entry.vector_table,)
                ):
                    self._conn.execute(
                        f"DELETE FROM {entry.vector_table} WHERE memory_rowid IN "
                        "(SELECT value FROM json_each(?))",
                        (rowids,),
                    )
            self.add_audit(rows)
            self._conn.execute(
                f"DELETE FROM {QUEUE} WHERE rowid IN (SELECT value FROM json_each(?))", (rowids,)
            )
        return _counted(collection, rows)

    def _forget_turns(
        self, rowids: str, rules: dict[int, str], run_id: str, at: datetime
    ) -> list[AuditRow]:
        chosen = "id IN (SELECT value FROM json_each(?))"
        found = self._rows(
            "SELECT id, org_id, project_id, user_id, agent_id, session_id, turn_seq, snapshot_id "
            f"FROM turns WHERE {chosen}",
            (rowids,),
        )
        self._conn.execute(
            "INSERT INTO turns_fts (turns_fts, rowid, name, content) "
            f"SELECT 'delete', id, name, content FROM turns WHERE {chosen}",
            (rowids,),
        )
        self._conn.execute(f"DELETE FROM turns WHERE {chosen}", (rowids,))
        touched = orjson.dumps(sorted({r[7] for r in found if r[7]})).decode()
        emptied = self._rows(
            "SELECT id FROM snapshots WHERE id IN (SELECT value FROM json_each(?)) "
            "AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.snapshot_id = snapshots.id)",
            (touched,),
        )
        self._conn.executemany("UPDATE snapshots SET summary = '' WHERE id = ?", emptied)
        self._fence(emptied, "*", at)
        return [
            _forgotten(
                TURNS,
                run_id,
                at,
                rules[rowid],
                org,
                project,
                user,
                agent,
                f"{session}#{seq}",
                1,
                snapshot,
            )
            for rowid, org, project, user, agent, session, seq, snapshot in found
        ]

    def _forget_memories(
        self, collection: str, rowids: str, rules: dict[int, str], run_id: str, at: datetime
    ) -> list[AuditRow]:
        table = memory_sql.table(collection)
        chosen = "rowid IN (SELECT value FROM json_each(?))"
        found = self._rows(
            "SELECT rowid, id, org_id, project_id, user_id, agent_id, version, evidence "
            f"FROM {table} WHERE {chosen}",
            (rowids,),
        )
        self._conn.execute(
            f"INSERT INTO {table}_fts ({table}_fts, rowid, text) "
            f"SELECT 'delete', rowid, text FROM {table} WHERE {chosen}",
            (rowids,),
        )
        self._conn.execute(f"DELETE FROM {table} WHERE {chosen}", (rowids,))
        ids = orjson.dumps([r[1] for r in found]).decode()
        self._conn.execute(
            "UPDATE audit SET text = ? WHERE memory_type = ? AND text != ? "
            "AND memory_id IN (SELECT value FROM json_each(?))",
            (REDACTED, collection, REDACTED, ids),
        )
        evidence = {(s,) for r in found for s in orjson.loads(r[7])}
        self._fence(sorted(evidence), collection, at)
        return [
            _forgotten(
                collection,
                run_id,
                at,
                rules[rowid],
                org,
                project,
                user,
                agent,
                memory_id,
                version,
                None,
            )
            for rowid, memory_id, org, project, user, agent, version, _ in found
        ]

    def _fence(self, snapshots: Sequence[tuple[str]], handler: str, at: datetime) -> None:
        self._conn.executemany(
            "INSERT OR IGNORE INTO forgotten_evidence (snapshot_id, handler, forgotten_at) "
            "VALUES (?, ?, ?)",
            [(s, handler, sql.iso(at)) for (s,) in snapshots],
        )

    def expired_among(self, source: str, hits: Sequence[Hit], expiry: Expiry) -> set[str]:
        """The ids of those ``hits`` the policy expires (each ranked among all its owner's
        records), so a search leaves them out before tonight's run forgets them."""
        collection = TURNS if source == STM else collection_of(source)
        if not hits or collection not in RETAINED:
            return set()
        users = {h.user_id for h in hits}
        owners = None if None in users else sorted(u for u in users if u is not None)
        asked = retention_sql.expired_sql(collection, expiry, owners)
        if asked is None:
            return set()
        query, values = asked
        if collection == TURNS:
            key, table = "r.session_id || '#' || r.turn_seq", "turns"
        else:
            key, table = "r.id", memory_sql.table(collection)
        ids = orjson.dumps([h.id for h in hits]).decode()
        return {
            row[0]
            for row in self._rows(
                f"SELECT {key} FROM ({query}) x JOIN {table} r ON r.rowid = x.rowid "
                f"WHERE {key} IN (SELECT value FROM json_each(?))",
                [*values, ids],
            )
        }


def _counted(collection: str, rows: Sequence[AuditRow]) -> list[ForgetCount]:
    owners = Counter((r.org_id, r.project_id, r.user_id, r.rule or "") for r in rows)
    return [
        ForgetCount(
            org_id=org,
            project_id=project,
            user_id=user,
            collection=collection,
            rule=rule,
            records=records,
        )
        for (org, project, user, rule), records in owners.items()
    ]


def _forgotten(
    collection: str,
    run_id: str,
    at: datetime,
    rule: str,
    org: str,
    project: str,
    user: str | None,
    agent: str | None,
    memory_id: str,
    version: int,
    snapshot: str | None,
) -> AuditRow:
    return AuditRow(
        run_id=run_id,
        at=at,
        day=at.date(),
        org_id=org,
        project_id=project,
        user_id=user,
        agent_id=agent,
        memory_type=collection,
        action=ReconcileAction.FORGET,
        memory_id=memory_id,
        version=version,
        snapshot_id=snapshot,
        text="",
        rule=rule,
    )
