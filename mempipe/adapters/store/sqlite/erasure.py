"""The SQLite store's erasure role: one user's turns, snapshots and private memories deleted
with their text-index entries and vectors, the user's audit text redacted, in one
transaction."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime

from mempipe.adapters.store.sqlite import memory_sql
from mempipe.adapters.store.sqlite.base import SqliteParts
from mempipe.adapters.store.writer_epoch import fence_time
from mempipe.errors import ConfigError
from mempipe.schemas.bundle import REDACTED, BundleSelection, StoredUser
from mempipe.schemas.embedding import RegistryEntry
from mempipe.schemas.memory import MEMORY_COLLECTIONS


class SqliteErasure(SqliteParts):
    """Data requests: what one user's erase removes."""

    registry: Callable[[], list[RegistryEntry]]

    def erase_user(self, selection: BundleSelection, *, dry_run: bool) -> dict[str, int]:
        """Counts of what goes (``dry_run``: of what would go; nothing changes)."""
        owner, values = _owner(selection)
        counts: Counter[str] = Counter()
        self._conn.execute("PRAGMA secure_delete = ON")
        with self._writing():
            turns = [r[0] for r in self._rows(f"SELECT id FROM turns WHERE {owner}", values)]
            snapshots = f"SELECT id FROM snapshots WHERE {owner}"
            counts["turns"] = len(turns)
            counts["snapshots"] = self._count(f"SELECT count(*) FROM ({snapshots})", values)
            counts["extraction_states"] = self._count(
                f"SELECT count(*) FROM snapshot_extractions WHERE snapshot_id IN ({snapshots})",
                values,
            )
            counts["failures"] = self._count(
                f"SELECT count(*) FROM failures WHERE snapshot_id IN ({snapshots})", values
            )
            counts["audit_redacted"] = self._count(
                f"SELECT count(*) FROM audit WHERE {owner} AND text IS NOT ?", [*values, REDACTED]
            )
            memories = {
                c: [
                    r[0]
                    for r in self._rows(
                        f"SELECT rowid FROM {memory_sql.table(c)} WHERE {owner} "
                        "AND visibility = 'private'",
                        values,
                    )
                ]
                for c in MEMORY_COLLECTIONS
            }
            counts.update({c: len(ids) for c, ids in memories.items()})
            counts["vectors"] = self._vectors({"stm": turns, **memories}, dry_run=dry_run)
            if dry_run:
                return dict(counts)
            self._conn.execute(
                "INSERT INTO turns_fts (turns_fts, rowid, name, content) "
                f"SELECT 'delete', id, name, content FROM turns WHERE {owner}",
                values,
            )
            self._conn.execute(
                f"DELETE FROM snapshot_extractions WHERE snapshot_id IN ({snapshots})", values
            )
            self._conn.execute(f"DELETE FROM failures WHERE snapshot_id IN ({snapshots})", values)
            self._conn.execute(f"DELETE FROM turns WHERE {owner}", values)
            self._conn.execute(f"DELETE FROM snapshots WHERE {owner}", values)
            for collection, rowids in memories.items():
                table = memory_sql.table(collection)
                self._conn.executemany(
                    f"INSERT INTO {table}_fts ({table}_fts, rowid, text) "
                    f"SELECT 'delete', rowid, text FROM {table} WHERE rowid = ?",
                    [(r,) for r in rowids],
                )
                self._conn.executemany(
                    f"DELETE FROM {table} WHERE rowid = ?", [(r,) for r in rowids]
                )
            self._conn.execute(
                f"UPDATE audit SET text = ? WHERE {owner} AND text IS NOT ?",
                (REDACTED, *values, REDACTED),
            )
            self._conn.execute(
                "INSERT INTO erased_owners (user_id, org_id, project_id, erased_at) "
                "VALUES (?, ?, ?, ?)",
                (
                    selection.user_id,
                    selection.org_id,
                    selection.project_id,
                    fence_time(datetime.now(UTC)),
                ),
            )
        self._purge(["turns_fts", *(f"{memory_sql.table(c)}_fts" for c in MEMORY_COLLECTIONS)])
        return dict(counts)

    def _purge(self, text_indexes: list[str]) -> None:
        """What the deletes leave on disk goes too: each text index merged into one segment
        (FTS5 keeps a deleted row's terms until its segments merge), the freed pages zeroed
        (``secure_delete``), and the write-ahead log's copies of the old pages truncated."""
        with self._writing():
            for name in text_indexes:
                self._conn.execute(f"INSERT INTO {name} ({name}) VALUES ('optimize')")
        self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def erased_since(
        self, org_id: str, project_id: str, user_id: str | None, epoch: datetime
    ) -> bool:
        """Whether an erase of this owner committed after ``epoch``: work that began
        before it must not write that owner's data (the triggers of migration 0017 drop any
        such row; this lets a writer say so instead)."""
        return bool(
            self._rows(
                "SELECT 1 FROM erased_owners WHERE user_id = ? "
                "AND (org_id IS NULL OR org_id = ?) AND (project_id IS NULL OR project_id = ?) "
                "AND erased_at > ? LIMIT 1",
                (user_id, org_id, project_id, fence_time(epoch)),
            )
        )

    def stored_users(self, selection: BundleSelection) -> list[StoredUser]:
        where, values = _within(selection)
        parts = [
            "SELECT org_id, project_id, user_id, count(*) AS turns, 0 AS memories, "
            f"min(created_at) AS first, max(created_at) AS last FROM turns {where} "
            "GROUP BY org_id, project_id, user_id"
        ] + [
            "SELECT org_id, project_id, user_id, 0, count(*), min(created_at), max(updated_at) "
            f"FROM {memory_sql.table(c)} {where} GROUP BY org_id, project_id, user_id"
            for c in MEMORY_COLLECTIONS
        ]
        rows = self._rows(
            "SELECT org_id, project_id, user_id, sum(turns), sum(memories), min(first), "
            f"max(last) FROM ({' UNION ALL '.join(parts)}) "
            "GROUP BY org_id, project_id, user_id ORDER BY org_id, project_id, user_id",
            values * len(parts),
        )
        return [
            StoredUser(
                org_id=org,
                project_id=project,
                user_id=user,
                turns=turns,
                memories=memories,
                first_seen=first,
                last_seen=last,
            )
            for org, project, user, turns, memories, first, last in rows
        ]

    def erased_owners(self, selection: BundleSelection) -> list[BundleSelection]:
        clauses, values = [], []
        for field in ("org_id", "project_id", "user_id"):
            value = getattr(selection, field)
            if value is not None:
                clauses.append(f"({field} = ? OR {field} IS NULL)")
                values.append(value)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._rows(
            f"SELECT org_id, project_id, user_id FROM erased_owners {where} "
            "GROUP BY org_id, project_id, user_id ORDER BY min(id)",
            values,
        )
        return [BundleSelection(org_id=o, project_id=p, user_id=u) for o, p, u in rows]

    def _vectors(self, rowids: dict[str, list[int]], *, dry_run: bool) -> int:
        removed = 0
        for entry in self.registry():
            ids = rowids.get(entry.collection, [])
            if not ids or not self._rows(
                "SELECT 1 FROM sqlite_master WHERE name = ?", (entry.vector_table,)
            ):
                continue
            held = [
                (r,)
                for r in ids
                if self._rows(f"SELECT 1 FROM {entry.vector_table} WHERE memory_rowid = ?", (r,))
            ]
            removed += len(held)
            if not dry_run:
                self._conn.executemany(
                    f"DELETE FROM {entry.vector_table} WHERE memory_rowid = ?", held
                )
        return removed

    def _count(self, query: str, values: list) -> int:
        return self._rows(query, values)[0][0]


def _within(selection: BundleSelection) -> tuple[str, list[str]]:
    """A WHERE clause of every field ``selection`` gives (none: every row)."""
    given = {k: v for k, v in selection.model_dump().items() if v is not None}
    if not given:
        return "", []
    return "WHERE " + " AND ".join(f"{k} = ?" for k in given), list(given.values())


def _owner(selection: BundleSelection) -> tuple[str, list[str]]:
    if selection.user_id is None:
        raise ConfigError("an erase names its user: give --user-id")
    clauses, values = ["user_id = ?"], [selection.user_id]
    for field in ("org_id", "project_id"):
        value = getattr(selection, field)
        if value is not None:
            clauses.append(f"{field} = ?")
            values.append(value)
    return " AND ".join(clauses), values
