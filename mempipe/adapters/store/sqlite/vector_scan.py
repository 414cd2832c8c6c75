"""A wide KNN as one matrix product: a vector table held in memory by a process that searches
beyond one user more than once.

sqlite-vec's PyPI build computes distances without SIMD and keeps each user's vectors in chunks
of their own, so a KNN over a whole org walks every user's chunks: 68 ms for 100,000 vectors of
384 dimensions, where numpy's product over the same matrix takes 7 ms. A scope that names a user
stays with sqlite-vec (its partition holds only that user's vectors). Here the vectors are read
once, scaled to unit length (cosine: the product is the similarity sqlite-vec reports as
``1 - distance``), with each filter column as integer codes: the scope's filter is a mask applied
before the k nearest are picked, so the k nearest are the k nearest in scope, as inside the KNN.
A quantized table is held as its index compares it (bytes or bits: a quarter or a thirty-second
of the floats' memory), and its nearest candidates are ranked by their full vectors, read from
the table, as its KNN ranks them. The copy is dropped when any connection writes to the
database or changes its schema; a table is read only once sqlite-vec's wide searches since
then have cost as much as reading it would (:class:`VectorScans`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

import apsw
import numpy as np
import orjson

from mempipe.adapters.store.sqlite.held import database_version
from mempipe.adapters.store.sqlite.memory_sql import (
    OVERSAMPLE,
    QUANTIZED,
    parse_vector_ddl,
    quantize_sql,
)
from mempipe.schemas.indexes import Quantization

READ_SECONDS_PER_ROW = 25e-6
"""What reading a vector table into memory costs a row (measured: 2.8 s for 100,000 vectors of
384 dimensions with their filter columns, on a busy 2-core machine)."""
MAX_BYTES = 1 << 30
"""Largest matrix held (2.8M vectors of 384 dimensions as floats, 11M as bytes, 89M as bits); a
larger table is searched by sqlite-vec."""
BATCH = 10_000
BLOCK = 1_024
"""Rows of byte codes turned into floats at a time, so a scalar-quantized matrix is never held
as floats (1,024: the block stays in the CPU's cache; 8,192 took twice as long)."""
LAYOUT = {
    Quantization.NONE: (np.dtype(np.float32), 1),
    Quantization.SCALAR: (np.dtype(np.int8), 1),
    Quantization.BINARY: (np.dtype(np.uint8), 8),
}
"""How a row is held: its element type, and the dimensions each element packs."""


@dataclass(frozen=True)
class VectorMatrix:
    """A table's rows as its index compares them: unit floats, or its quantized codes (bytes,
    or bits packed eight to a byte)."""

    rowids: np.ndarray
    codes: np.ndarray
    quantization: Quantization
    columns: dict[str, tuple[np.ndarray, dict[str, int]]]
    """Per filter column: each row's code, and the code of each value."""
    inverse_norms: np.ndarray | None = None
    """Per row of byte codes, one over its length: their cosine, as sqlite-vec's int8 KNN."""

    def nearest(
        self, query: np.ndarray, where: Sequence[tuple[str, str]], k: int
    ) -> list[tuple[int, float]]:
        """The k nearest rows whose columns hold the given values: (rowid, score), nearest
        first; the query is given as the rows are held. Every column filtered on must be one
        of the table's."""
        in_scope: np.ndarray | None = None
        for column, value in where:
            codes, index = self.columns[column]
            code = index.get(value)
            if code is None:
                return []
            matches = codes == code
            in_scope = matches if in_scope is None else in_scope & matches
        scores = self._scores(query)
        if in_scope is not None:
            scores = np.where(in_scope, scores, -np.inf)
        count = len(scores) if in_scope is None else int(np.count_nonzero(in_scope))
        k = min(k, count)
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        order = top[np.argsort(-scores[top], kind="stable")]
        return [(int(self.rowids[i]), float(scores[i])) for i in order]

    def _scores(self, query: np.ndarray) -> np.ndarray:
        """Higher is nearer: cosine for floats and bytes, minus the Hamming distance for bits."""
        if self.quantization is Quantization.BINARY:
            return (
                -np.bitwise_count(self.codes ^ query).sum(axis=1, dtype=np.int32).astype(np.float32)
            )
        if self.quantization is Quantization.NONE:
            return self.codes @ unit(query)
        scores = np.empty(len(self.codes), dtype=np.float32)
        wanted = unit(query.astype(np.float32))
        for start in range(0, len(self.codes), BLOCK):
            scores[start : start + BLOCK] = (
                self.codes[start : start + BLOCK].astype(np.float32) @ wanted
            )
        return scores * self.inverse_norms


def unit(vector: np.ndarray) -> np.ndarray:
    return vector / np.float32(np.linalg.norm(vector) or 1.0)


def load(conn: apsw.Connection, table: str) -> VectorMatrix | None:
    """The table's vectors as its index compares them, and its filter columns; None when they
    would pass :data:`MAX_BYTES` or it holds none."""
    found = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchall()
    if not found:
        return None
    dimensions, _, columns, quantization = parse_vector_ddl(found[0][0])
    dtype, packed = LAYOUT[quantization]
    width = dimensions // packed
    count = _rows(conn, table)
    if count == 0 or count * width * dtype.itemsize > MAX_BYTES:
        return None
    held = "embedding" if quantization is Quantization.NONE else QUANTIZED
    rowids: list[np.ndarray] = []
    vectors: list[np.ndarray] = []
    values: list[list[str]] = [[] for _ in columns]
    cursor = conn.execute(f"SELECT {', '.join(('memory_rowid', held, *columns))} FROM {table}")
    while rows := list(islice(cursor, BATCH)):
        rowids.append(np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows)))
        joined = b"".join(row[1] for row in rows)
        vectors.append(np.frombuffer(joined, dtype=dtype).reshape(len(rows), width))
        for i, column_values in enumerate(values):
            column_values.extend(row[2 + i] for row in rows)
    codes = np.concatenate(vectors)
    inverse_norms = None
    if quantization is Quantization.NONE:
        norms = np.linalg.norm(codes, axis=1, keepdims=True)
        codes /= np.where(norms == 0, 1, norms)
    elif quantization is Quantization.SCALAR:
        norms = np.concatenate(
            [
                np.linalg.norm(codes[s : s + BLOCK].astype(np.float32), axis=1)
                for s in range(0, len(codes), BLOCK)
            ]
        )
        inverse_norms = 1 / np.where(norms == 0, 1, norms)
    coded = {}
    for column, column_values in zip(columns, values, strict=True):
        names, indices = np.unique(np.asarray(column_values, dtype=object), return_inverse=True)
        coded[column] = (indices, {str(name): i for i, name in enumerate(names)})
    return VectorMatrix(np.concatenate(rowids), codes, quantization, coded, inverse_norms)


def rescored(
    conn: apsw.Connection, table: str, query: np.ndarray, candidates: list[int], k: int
) -> list[tuple[int, float]]:
    """The k of ``candidates`` nearest by their full vectors: (rowid, cosine similarity)."""
    rows = conn.execute(
        f"SELECT c.value, v.embedding FROM json_each(?) c JOIN {table} v "
        "ON v.memory_rowid = c.value",
        (orjson.dumps(candidates).decode(),),
    ).fetchall()
    if not rows:
        return []
    full = np.frombuffer(b"".join(row[1] for row in rows), dtype=np.float32).reshape(len(rows), -1)
    scores = (full @ unit(query)) / np.linalg.norm(full, axis=1)
    order = np.argsort(-scores, kind="stable")[:k]
    return [(int(rows[i][0]), float(scores[i])) for i in order]


class VectorScans:
    """Per connection: the matrices held, dropped when the database changes.

    Reading a table costs about as much as 40 of sqlite-vec's scans of it (100,000 vectors:
    2.8 s against 65 ms), so a table is read only once the wide searches answered by sqlite-vec
    since the last change have cost that much (:data:`READ_SECONDS_PER_ROW` a row): a process
    that writes between its searches keeps paying sqlite-vec's price, never more than twice it,
    and one that searches on pays it about 40 times, then 5 ms a search."""

    def __init__(self, conn: apsw.Connection) -> None:
        self._conn = conn
        self._held: dict[str, VectorMatrix | None] = {}
        self._spent: dict[str, float] = {}
        self._rows: dict[str, int] = {}
        self._version: tuple[int, int, int] | None = None

    def nearest(
        self,
        table: str,
        query: Sequence[float],
        where: Sequence[tuple[str, str]],
        k: int,
    ) -> list[tuple[int, float]] | None:
        """The k nearest in scope, or None where sqlite-vec should answer (and :meth:`searched`
        be told how long it took): the table not yet worth reading, too large to hold or
        missing, or a filter on a column the table does not have (sqlite-vec says so)."""
        self._drop_if_changed()
        if table not in self._held:
            if table not in self._rows:
                self._rows[table] = _rows(self._conn, table)
            if self._spent.get(table, 0.0) < self._rows[table] * READ_SECONDS_PER_ROW:
                return None
            self._held[table] = load(self._conn, table)
        matrix = self._held[table]
        if matrix is None or any(column not in matrix.columns for column, _ in where):
            return None
        vector = np.asarray(query, dtype=np.float32)
        if matrix.quantization is Quantization.NONE:
            return matrix.nearest(vector, where, k)
        quantized = self._conn.execute(
            f"SELECT {quantize_sql(matrix.quantization)}", (vector.tobytes(),)
        ).fetchall()[0][0]
        dtype = LAYOUT[matrix.quantization][0]
        found = matrix.nearest(
            np.frombuffer(quantized, dtype=dtype), where, k * OVERSAMPLE[matrix.quantization]
        )
        return rescored(self._conn, table, vector, [rowid for rowid, _ in found], k)

    def searched(self, table: str, seconds: float) -> None:
        """A wide search of the table that sqlite-vec answered took ``seconds``."""
        self._drop_if_changed()
        self._spent[table] = self._spent.get(table, 0.0) + seconds

    def _drop_if_changed(self) -> None:
        version = database_version(self._conn)
        if version != self._version:
            self._held.clear()
            self._spent.clear()
            self._rows.clear()
            self._version = version


def _rows(conn: apsw.Connection, table: str) -> int:
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}_rowids").fetchall()[0][0])
    except apsw.SQLError:  # no such table: sqlite-vec says so
        return 0
