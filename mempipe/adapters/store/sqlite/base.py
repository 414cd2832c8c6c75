"""What every role of the SQLite store shares: the connection, reads, and writes whose errors come
back as mempipe's."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import apsw
import numpy as np

from mempipe.adapters.store.sqlite import memory_sql, sql
from mempipe.adapters.store.sqlite.configuration import SqliteConfig
from mempipe.adapters.store.sqlite.exceptions import translate
from mempipe.schemas.indexes import UNQUANTIZED, Quantization


def now_text() -> str:
    return sql.iso(datetime.now(UTC)) or ""


def blob(vector: list[float]) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


class SqliteParts:
    """Mixed into :class:`SqliteStore` under each role; holds its connection."""

    url: str
    config: SqliteConfig
    _conn: apsw.Connection
    partition_keys: tuple[str, ...] = ()
    custom_types: tuple[str, ...] = ()
    quantization: Mapping[str, Quantization] = UNQUANTIZED
    _rehearsing: bool = False

    @contextmanager
    def _reader(self) -> Iterator[apsw.Connection]:
        """A read-only connection of its own, for a long read that must not wait for another
        thread's writes on the main connection (WAL: it reads what is committed, unblocked)."""
        try:
            reader = apsw.Connection(str(self.config.path), flags=apsw.SQLITE_OPEN_READONLY)
            reader.setbusytimeout(self.config.busy_timeout_ms)
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc
        try:
            yield reader
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc
        finally:
            reader.close()

    def _table_shape(self, table: str) -> memory_sql.VectorShape | None:
        """A vector table's shape as its DDL says (None: no such table): what it holds, not what
        the configuration declares, so a drifted table keeps working until rebuilt."""
        sql_text = self._rows("SELECT sql FROM sqlite_master WHERE name = ?", (table,))
        return memory_sql.parse_vector_ddl(sql_text[0][0]) if sql_text else None

    def _rows(self, query: str, bindings: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._conn.execute(query, bindings).fetchall()
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc

    @contextmanager
    def write_transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE: the write lock is taken first, waiting out other writers under the
        busy timeout, and held from the first read, so a read-decide-write (reconciliation) is
        never interleaved with another writer's. A deferred transaction that reads first fails
        at once with "database is locked" when another process wrote in between."""
        if self._rehearsing:
            with self._savepoint():
                yield
            return
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc
        try:
            yield
        except BaseException:
            if self._conn.in_transaction:  # SQLite rolls back by itself on a full disk
                self._conn.execute("ROLLBACK")
            raise
        try:
            self._conn.execute("COMMIT")
        except apsw.Error as exc:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise translate(exc, self.url) from exc

    @contextmanager
    def rehearsal(self) -> Iterator[None]:
        """BEGIN IMMEDIATE, always rolled back; write transactions inside are savepoints. The
        database file is not written: WAL keeps uncommitted pages out of it."""
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc
        self._rehearsing = True
        try:
            yield
        finally:
            self._rehearsing = False
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")

    @contextmanager
    def _savepoint(self) -> Iterator[None]:
        try:
            with self._conn:
                yield
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """A write whose SQLite errors come back as mempipe's (busy is transient): its own
        immediate transaction, or a savepoint inside the caller's."""
        try:
            if self._conn.in_transaction:
                with self._conn:
                    yield
            else:
                with self.write_transaction():
                    yield
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc
