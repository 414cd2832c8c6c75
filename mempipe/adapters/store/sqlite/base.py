"""What every role of the SQLite store shares: the connection, reads, and writes whose errors come
back as mempipe's."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import apsw
import numpy as np

from mempipe.adapters.store.sqlite import sql
from mempipe.adapters.store.sqlite.exceptions import translate


def now_text() -> str:
    return sql.iso(datetime.now(UTC)) or ""


def blob(vector: list[float]) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


class SqliteParts:
    """Mixed into :class:`SqliteStore` under each role; holds its connection."""

    url: str
    _conn: apsw.Connection
    partition_keys: tuple[str, ...] = ()
    custom_types: tuple[str, ...] = ()

    def _rows(self, query: str, bindings: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._conn.execute(query, bindings).fetchall()
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """A transaction whose SQLite errors come back as mempipe's (busy is transient)."""
        try:
            with self._conn:
                yield
        except apsw.Error as exc:
            raise translate(exc, self.url) from exc
