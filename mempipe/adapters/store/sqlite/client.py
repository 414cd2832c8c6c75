"""The SQLite implementation of the store port."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import apsw
import orjson
import sqlite_vec

from mempipe.adapters.store.base import StoreCapabilities, conflict_reject
from mempipe.adapters.store.sqlite import sql
from mempipe.adapters.store.sqlite.configuration import SqliteConfig
from mempipe.adapters.store.sqlite.embeddings import SqliteEmbeddingOps
from mempipe.adapters.store.sqlite.exceptions import translate
from mempipe.adapters.store.sqlite.extraction import SqliteExtractionOps, now_text
from mempipe.adapters.store.sqlite.indexes import SqliteIndexOps
from mempipe.adapters.store.sqlite.leases import SqliteLeaseOps
from mempipe.adapters.store.sqlite.search import SqliteSearchOps
from mempipe.domain.promotion import TurnStamp
from mempipe.errors import StoreError
from mempipe.schemas.memory import MEMORY_COLLECTIONS
from mempipe.schemas.reject import Reject
from mempipe.schemas.run import RunRecord, RunStatus
from mempipe.schemas.snapshot import ExtractionStatus, Snapshot
from mempipe.schemas.summaries import StoreStats, TurnWriteResult
from mempipe.schemas.turn import Turn

if TYPE_CHECKING:
    from mempipe.migrations import Migration


def _is_mempipe_store(conn: apsw.Connection) -> bool:
    """Read before anything is written (even the WAL switch), so a foreign file stays as it is."""
    return bool(
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_migrations'"
        ).fetchall()
    )


def _has_tables(conn: apsw.Connection) -> bool:
    return bool(conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall())


class SqliteStore(
    SqliteExtractionOps, SqliteSearchOps, SqliteEmbeddingOps, SqliteIndexOps, SqliteLeaseOps
):
    """One SQLite file, WAL mode, sqlite-vec loaded. Every write runs in a transaction."""

    capabilities = StoreCapabilities(transactions=True, vector_search=True, text_search=True)

    def __init__(self, config: SqliteConfig) -> None:
        self.config = config
        self.url = config.url
        self._conn = self._connect()

    def _connect(self) -> apsw.Connection:
        where = str(self.config.path)
        flags = apsw.SQLITE_OPEN_READWRITE
        if not self.config.existing:
            flags |= apsw.SQLITE_OPEN_CREATE
        try:
            conn = apsw.Connection(where, flags=flags)
            conn.setbusytimeout(self.config.busy_timeout_ms)
            if not _is_mempipe_store(conn) and (self.config.existing or _has_tables(conn)):
                conn.close()
                raise StoreError(
                    f"sqlite:///{where} is not a mempipe store (no _migrations table"
                    + ("" if self.config.existing else "; it holds another application's tables")
                    + "); nothing was changed"
                )
            conn.enable_load_extension(True)
            conn.load_extension(sqlite_vec.loadable_path())
            conn.enable_load_extension(False)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
        except apsw.Error as exc:
            raise translate(exc, where) from exc
        return conn

    def _rows(self, query: str, bindings: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._conn.execute(query, bindings).fetchall()
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc

    # -- migrations -------------------------------------------------------------------------

    def applied_migrations(self) -> list[str]:
        exists = self._rows(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_migrations'"
        )
        if not exists:
            return []
        return [row[0] for row in self._rows("SELECT id FROM _migrations ORDER BY id")]

    def apply_migration(self, migration: Migration) -> None:
        """In one transaction, with foreign keys off and checked before the commit: SQLite's
        procedure for rebuilding a table that others reference."""
        where = f"{self.url} migration {migration.id}"
        self._conn.execute("PRAGMA foreign_keys = OFF")
        try:
            with self._conn:
                self._conn.execute(sql.MIGRATIONS_TABLE)
                if hasattr(migration.module, "sqlite"):
                    migration.module.sqlite(self._conn)
                broken = self._conn.execute("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise StoreError(f"{where}: foreign keys broken: {broken[:5]}")
                self._conn.execute(
                    "INSERT INTO _migrations (id, description, applied_at) VALUES (?, ?, ?) "
                    "ON CONFLICT (id) DO NOTHING",
                    (migration.id, migration.description, now_text()),
                )
        except apsw.Error as exc:
            raise translate(exc, where) from exc
        finally:
            self._conn.execute("PRAGMA foreign_keys = ON")

    # -- turns ------------------------------------------------------------------------------

    def insert_turns(self, turns: Sequence[Turn], run_id: str | None) -> TurnWriteResult:
        if not turns:
            return TurnWriteResult()
        rows = [sql.turn_row(turn, run_id) for turn in turns]
        conn = self._conn
        try:
            with conn:
                before = conn.execute(sql.MAX_TURN_ID).fetchall()[0][0]
                conn.executemany(sql.INSERT_TURN, rows)
                inserted = conn.execute(sql.MAX_TURN_ID).fetchall()[0][0] - before
                if inserted:
                    conn.execute(sql.SYNC_TURNS_FTS, (before,))
                conflicts = self._conflicts(turns, before) if inserted < len(turns) else []
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc
        skipped = len(turns) - inserted
        return TurnWriteResult(
            inserted=inserted, duplicates=skipped - len(conflicts), conflicts=conflicts
        )

    def _conflicts(self, turns: Sequence[Turn], before: int) -> list[Reject]:
        """Skipped turns whose key is stored with other content: rejects, not duplicates."""
        keys = [(t.org_id, t.project_id, t.user_id or "", t.session_id, t.turn_seq) for t in turns]
        stored = self._conn.executemany(sql.STORED_TURN_BY_KEY, keys)
        winners: dict[tuple[str, str, str, str, int], Turn] = {}
        conflicts: list[Reject] = []
        for turn, key, row in zip(turns, keys, stored, strict=True):
            row_id, role, content, path, line, index = row
            if row_id > before and key not in winners:
                winners[key] = turn
                continue
            same_batch = winners.get(key) if row_id > before else None
            if same_batch is not None:
                role, content = same_batch.role.value, same_batch.content
                path, line, index = same_batch.source.path, same_batch.source.line, None
            if (role, content) == (turn.role.value, turn.content):
                continue
            conflicts.append(conflict_reject(turn, path, line, index))
        return conflicts

    def count_unpromoted_turns(self) -> int:
        return self._rows("SELECT count(*) FROM turns WHERE snapshot_id IS NULL")[0][0]

    def iter_unpromoted_turns(self, page_size: int = 5000) -> Iterator[TurnStamp]:
        last: tuple[Any, ...] | None = None
        while True:
            if last is None:
                page = self._rows(sql.unpromoted_page_sql(after_key=False), (page_size,))
            else:
                page = self._rows(sql.unpromoted_page_sql(after_key=True), (*last, page_size))
            if not page:
                return
            last = page[-1][:5]
            for row in page:
                yield sql.stamp_from_row(row)
            if len(page) < page_size:
                return

    def save_snapshots(self, snapshots: Sequence[Snapshot]) -> set[str]:
        if not snapshots:
            return set()
        now = now_text()
        conn = self._conn
        try:
            with conn:
                rows = [sql.snapshot_row(s, now) for s in snapshots]
                created = {row[0] for row in conn.executemany(sql.INSERT_SNAPSHOT, rows)}
                conn.executemany(
                    sql.INSERT_EXTRACTION_STATE,
                    [
                        (s.snapshot_id, e.handler, e.status.value, e.attempts, e.last_error, now)
                        for s in snapshots
                        for e in s.extraction
                    ],
                )
                conn.executemany(
                    sql.MARK_TURNS_PROMOTED,
                    [
                        (
                            s.snapshot_id,
                            s.org_id,
                            s.project_id,
                            s.user_id,
                            s.session_id,
                            s.first_turn_seq,
                            s.last_turn_seq,
                        )
                        for s in snapshots
                    ],
                )
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc
        return created

    # -- runs -------------------------------------------------------------------------------

    def start_run(self, run: RunRecord) -> None:
        try:
            with self._conn:
                self._conn.execute(
                    sql.UPSERT_RUN,
                    (
                        run.run_id,
                        run.flow,
                        orjson.dumps(run.parameters).decode(),
                        run.status.value,
                        orjson.dumps(run.counts).decode(),
                        orjson.dumps(run.checkpoints).decode(),
                        run.error,
                        sql.iso(run.started_at),
                        sql.iso(run.finished_at),
                        run.host,
                        run.pid,
                        run.machine,
                        sql.iso(run.heartbeat_at),
                    ),
                )
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc

    def finish_run(
        self, run_id: str, status: RunStatus, counts: dict[str, int], error: str | None = None
    ) -> None:
        """The run's leases end with it."""
        try:
            with self._conn:
                self._conn.execute(
                    sql.FINISH_RUN,
                    (status.value, orjson.dumps(counts).decode(), error, now_text(), run_id),
                )
                self._conn.execute("DELETE FROM leases WHERE run_id = ?", (run_id,))
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._rows(sql.SELECT_RUN, (run_id,))
        return self._run_from_row(rows[0]) if rows else None

    def _run_from_row(self, row: tuple[Any, ...]) -> RunRecord:
        rid, flow, params, status, counts, checkpoints, error, started, finished = row[:9]
        host, pid, machine, heartbeat = row[9:]
        return RunRecord(
            run_id=rid,
            flow=flow,
            parameters=orjson.loads(params),
            status=RunStatus(status),
            counts=orjson.loads(counts),
            checkpoints=orjson.loads(checkpoints),
            error=error,
            started_at=sql.parse_iso(started),
            finished_at=sql.parse_iso(finished),
            host=host,
            pid=pid,
            machine=machine,
            heartbeat_at=sql.parse_iso(heartbeat),
        )

    def save_checkpoint(self, run_id: str, name: str, value: Any) -> None:
        try:
            with self._conn:
                self._conn.execute(
                    "UPDATE runs SET checkpoints = json_set(checkpoints, ?, json(?)) "
                    "WHERE run_id = ?",
                    (sql.json_key(name), orjson.dumps(value).decode(), run_id),
                )
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc

    def resume_point(self, flow: str, name: str, run_id: str) -> Any | None:
        rows = self._rows(
            "SELECT status, json_extract(checkpoints, ?) FROM runs WHERE flow = ? AND run_id != ? "
            "ORDER BY started_at DESC LIMIT 1",
            (sql.json_key(name), flow, run_id),
        )
        if not rows or rows[0][0] == RunStatus.COMPLETED.value:
            return None
        return rows[0][1]

    # -- stats ------------------------------------------------------------------------------

    def stats(self) -> StoreStats:
        turns, unpromoted, sessions = self._rows(
            "SELECT count(*), count(*) FILTER (WHERE snapshot_id IS NULL), "
            "(SELECT count(*) FROM (SELECT DISTINCT org_id, project_id, coalesce(user_id, ''), "
            "session_id FROM turns)) "
            "FROM turns"
        )[0]
        snapshots = {state.value: 0 for state in ExtractionStatus}
        snapshots.update(dict(self._rows(sql.SNAPSHOT_STATES)))
        snapshots["total"] = sum(snapshots.values())
        extraction: dict[str, dict[str, int]] = {}
        for handler, status, count in self._rows(
            "SELECT handler, status, count(*) FROM snapshot_extractions GROUP BY handler, status"
        ):
            extraction.setdefault(handler, {})[status] = count
        memories = {}
        for collection in MEMORY_COLLECTIONS:
            counts = {"active": 0, "superseded": 0}
            counts.update(
                dict(self._rows(f"SELECT status, count(*) FROM memories_{collection} GROUP BY 1"))
            )
            memories[collection] = counts
        failures = {"environmental": 0, "content": 0}
        failures.update(dict(self._rows("SELECT failure_class, count(*) FROM failures GROUP BY 1")))
        runs = dict(self._rows("SELECT status, count(*) FROM runs GROUP BY 1"))
        return StoreStats(
            store=self.url,
            turns=turns,
            unpromoted_turns=unpromoted,
            sessions=sessions,
            snapshots=snapshots,
            extraction=extraction,
            memories=memories,
            failures=failures,
            runs=runs,
        )

    def close(self) -> None:
        self._conn.close()
