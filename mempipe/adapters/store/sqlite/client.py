"""The SQLite implementation of the store port: one file, WAL mode, sqlite-vec loaded; the roles
are mixed in from their modules."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import apsw
import sqlite_vec

from mempipe.adapters.store.sqlite import migrations, sql
from mempipe.adapters.store.sqlite.audit import SqliteAuditLog
from mempipe.adapters.store.sqlite.base import now_text
from mempipe.adapters.store.sqlite.batches import SqliteProviderBatches
from mempipe.adapters.store.sqlite.configuration import SqliteConfig
from mempipe.adapters.store.sqlite.erasure import SqliteErasure
from mempipe.adapters.store.sqlite.exceptions import translate
from mempipe.adapters.store.sqlite.files import SqliteFileLog
from mempipe.adapters.store.sqlite.indexes import SqliteIndexAdmin
from mempipe.adapters.store.sqlite.leases import SqliteLeases
from mempipe.adapters.store.sqlite.memories import SqliteMemories
from mempipe.adapters.store.sqlite.registry import SqliteRegistry
from mempipe.adapters.store.sqlite.retention import SqliteRetention
from mempipe.adapters.store.sqlite.runs import SqliteRunLog
from mempipe.adapters.store.sqlite.search import SqliteSearch
from mempipe.adapters.store.sqlite.transfer import SqliteTransfer
from mempipe.adapters.store.sqlite.turns import SqliteTurns
from mempipe.adapters.store.sqlite.vectors import SqliteVectors
from mempipe.adapters.store.sqlite.work import SqliteWorkQueue
from mempipe.adapters.store.writer_epoch import fence_time, writer_epoch
from mempipe.errors import StoreError
from mempipe.migrations import Migration
from mempipe.schemas.memory import MEMORY_COLLECTIONS
from mempipe.schemas.snapshot import ExtractionStatus
from mempipe.schemas.summaries import StoreStats


def _is_mempipe_store(conn: apsw.Connection) -> bool:
    """Read before anything is written (even the WAL switch), so a foreign file stays as it is."""
    return bool(
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_migrations'"
        ).fetchall()
    )


def _on_read_only_medium(path: Path) -> bool:
    """The store's file is there, but nothing can be written beside it (EROFS: even root)."""
    return path.is_file() and not os.access(path.parent, os.W_OK)


_SOUND: set[tuple[Path, int]] = set()
"""Files (and their size) this process found sound: a command and the flow it starts prepare
the same store, and one check is enough."""


def check_max_bytes() -> int:
    from mempipe.settings import SqliteEnvironment

    return SqliteEnvironment().check_max_bytes


def _file_size(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return sum(p.stat().st_size for p in (path, wal) if p.exists())


def _has_tables(conn: apsw.Connection) -> bool:
    return bool(conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall())


class SqliteStore(
    SqliteTurns,
    SqliteWorkQueue,
    SqliteMemories,
    SqliteAuditLog,
    SqliteVectors,
    SqliteRegistry,
    SqliteSearch,
    SqliteIndexAdmin,
    SqliteRunLog,
    SqliteLeases,
    SqliteTransfer,
    SqliteErasure,
    SqliteRetention,
    SqliteFileLog,
    SqliteProviderBatches,
):
    """One SQLite file, WAL mode, sqlite-vec loaded. Every write runs in a transaction."""

    def __init__(self, config: SqliteConfig) -> None:
        self.config = config
        self.url = config.url
        self._conn = self._connect()

    def _connect(self) -> apsw.Connection:
        where = str(self.config.path)
        flags = apsw.SQLITE_OPEN_READWRITE
        if not self.config.existing:
            flags |= apsw.SQLITE_OPEN_CREATE
        if self.config.existing and _on_read_only_medium(self.config.path):
            # WAL mode needs to write its -shm beside the file: on a medium nobody can write
            # (a read-only mount, a snapshot), the store is opened as the immutable file it is.
            where, flags = f"file:{where}?immutable=1", apsw.SQLITE_OPEN_READONLY
            flags |= apsw.SQLITE_OPEN_URI
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
            conn.create_scalar_function(
                "mempipe_writer_epoch", lambda: fence_time(writer_epoch()), 0
            )
            if not flags & apsw.SQLITE_OPEN_READONLY:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
        except apsw.Error as exc:
            raise translate(exc, where) from exc
        return conn

    def check_integrity(self, *, full: bool = False) -> list[str]:
        """SQLite's ``integrity_check`` (``full``), else its ``quick_check`` where the file is
        no larger than ``MEMPIPE_SQLITE_CHECK_MAX_BYTES`` (a larger one is met page by page:
        a damaged page a command reads is its store error). Problems found, none when sound;
        a check that passed is not repeated in this process for the same file."""
        size = _file_size(self.config.path)
        if not full and (size > check_max_bytes() or (self.config.path, size) in _SOUND):
            return []
        found: list[str] = []
        for pragma in ("integrity_check", "quick_check")[0 if full else 1 :]:
            try:
                found = [str(row[0]) for row in self._conn.execute(f"PRAGMA {pragma}(20)")]
                break
            except apsw.Error as exc:  # the thorough check can stop at the damage: go on
                found = [f"{type(exc).__name__}: {exc}"]
        found = [
            line
            for text in found
            for line in text.splitlines()
            if line.strip() and not line.startswith("*** in database")
        ]
        problems = [] if found == ["ok"] else found
        if not problems:
            _SOUND.add((self.config.path, size))
        return problems

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
                step = migration.step(migrations.__name__)
                if step is not None:
                    step(self._conn)
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

    def record_capabilities(self) -> None:
        """FTS5 and sqlite-vec are part of every SQLite store: nothing to record."""

    def require_search(self, job: str) -> None:
        """Text and vector search are always there."""

    def require_reconcilable(self, memory_types: Sequence[str]) -> None:
        """sqlite-vec answers every owner's nearest memories."""

    def close(self) -> None:
        self._conn.close()
