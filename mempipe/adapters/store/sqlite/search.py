"""The SQLite store's search role: FTS5 text, sqlite-vec vectors and their fusion over turns and
memories."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import orjson

from mempipe.adapters.store.sqlite import (
    held_postings,
    memory_sql,
    scoped_bm25,
    search_sql,
    vector_scan,
)
from mempipe.adapters.store.sqlite.base import SqliteParts, blob
from mempipe.domain.fusion import fuse_hits
from mempipe.domain.query import query_words
from mempipe.schemas.indexes import Quantization
from mempipe.schemas.search import STM, Hit, Near, ReadFilter, collection_of

RANKED_FIRST = 500
"""How many of the best-ranked matches a search beyond one user joins to its scope first."""


def hit_of_row(source: str, row: tuple[Any, ...]) -> Hit:
    memory_id, text, org, project, user, agent, session, visibility, message_id, name, score = row
    return Hit(
        id=memory_id,
        source=source,
        score=float(score),
        text=text,
        org_id=org,
        project_id=project,
        user_id=user,
        agent_id=agent,
        session_id=session,
        visibility=visibility,
        message_id=message_id,
        name=name,
    )


class SqliteSearch(SqliteParts):
    """Reads for ``mempipe search`` and the recall gate."""

    _bm25: scoped_bm25.ScopedBm25 | None = None
    _scans: vector_scan.VectorScans | None = None
    _postings: held_postings.HeldPostings | None = None

    def search_text(self, source: str, query: str, filters: ReadFilter, k: int) -> list[Hit]:
        match = search_sql.fts_query(query)
        if match is None:
            return []
        found = (
            self._user_text(source, query, match, filters, k)
            if filters.user_id is not None
            else self._wide_text(source, query, match, filters, k)
        )
        if found is not None:
            return found
        sql, values = search_sql.text_search_sql(source, filters)
        return [hit_of_row(source, row) for row in self._rows(sql, (match, *values, k))]

    def _wide_text(
        self, source: str, query: str, match: str, filters: ReadFilter, k: int
    ) -> list[Hit] | None:
        """Beyond one user: the best-ranked matches first (from the postings this connection
        holds, else FTS5's own ranking of the match alone), then the scope in that order, k
        rows at first and twice as many each time after: for an org-wide scope most of them
        are in it. None when fewer than k of the first :data:`RANKED_FIRST` are in scope and
        more matches exist: FTS5 ranks them all then."""
        scope = search_sql.scoped_text(source, filters)
        first = max(RANKED_FIRST, k)
        ranked = self._held_ranking(scope.fts, query, first)
        if ranked is None:
            rows = self._rows(search_sql.ranked_first_sql(scope), (match, first, *scope.values, k))
            if len(rows) < k and self._matches(scope.fts, match) > first:
                return None
            return [hit_of_row(source, row) for row in rows]
        found: list[tuple[Any, ...]] = []
        start, size = 0, k
        while len(found) < k and start < len(ranked.best):
            chunk = ranked.best[start : start + size]
            rows = self._rows_in_scope(scope, [rowid for rowid, _ in chunk])
            found += [(*rows[rowid], -rank) for rowid, rank in chunk if rowid in rows]
            start, size = start + size, size * 2
        if len(found) < k and ranked.matches > len(ranked.best):
            return None
        return [hit_of_row(source, row) for row in found[:k]]

    def _rows_in_scope(
        self, scope: search_sql.ScopedText, rowids: list[int]
    ) -> dict[int, tuple[Any, ...]]:
        """Those of the rows that are in scope, by rowid, with their hit columns."""
        sql = search_sql.scoped_rows_sql(scope)
        return {
            row[-1]: row[:-1]
            for row in self._rows(sql, [orjson.dumps(rowids).decode(), *scope.values])
        }

    def _held_ranking(self, fts: str, query: str, n: int) -> held_postings.Ranked | None:
        terms = self._terms(query)
        if terms is None:
            return None
        if self._postings is None:
            self._postings = held_postings.HeldPostings(self._conn)
        return self._postings.best(fts, terms, n)

    @property
    def _ranking(self) -> scoped_bm25.ScopedBm25:
        """This connection's tokenizer, vocabulary tables and ranking function, made once."""
        if self._bm25 is None:
            self._bm25 = scoped_bm25.ScopedBm25(self._conn)
        return self._bm25

    def _terms(self, query: str) -> list[str] | None:
        """The query's words as the index holds them; None when one is not a single token."""
        return self._ranking.terms(query_words(query))

    def _matches(self, fts: str, match: str) -> int:
        return int(self._rows(f"SELECT count(*) FROM {fts} WHERE {fts} MATCH ?", (match,))[0][0])

    def _user_text(
        self, source: str, query: str, match: str, filters: ReadFilter, k: int
    ) -> list[Hit] | None:
        """One user's rows ranked as ``bm25()`` ranks them, without its walk over every
        document of every query word (:mod:`scoped_bm25`): from the postings this connection
        holds, else by walking the match inside the user's rowid span or by ranking the user's
        own rows from their text, whichever costs less. None where none is exact or cheaper."""
        scope = search_sql.scoped_text(source, filters)
        low, high, count = self._rows(search_sql.span_sql(scope), scope.values)[0]
        if not count:
            return []
        terms = self._terms(query)
        if terms is None:
            return None
        if self._postings is None:
            self._postings = held_postings.HeldPostings(self._conn)
        started = time.perf_counter()
        if self._postings.ready(scope.fts, terms):
            sql = search_sql.scope_rowids_sql(scope)
            rowids = np.fromiter((row[0] for row in self._rows(sql, scope.values)), np.int64)
            held = self._postings.within(scope.fts, terms, rowids)
            if held is not None:
                rows = self._rows_in_scope(scope, [rowid for rowid, _ in held[:k]])
                return [hit_of_row(source, (*rows[rowid], -rank)) for rowid, rank in held[:k]]
        counts = self._ranking.document_counts(scope.fts, terms)
        indexed, _ = scoped_bm25.index_size(self._conn, scope.fts)
        if scoped_bm25.span_walk_is_cheaper(indexed, counts, high - low, count):
            sql = search_sql.scoped_search_sql(scope, len(counts))
            ranked = self._rows(sql, (*counts, match, low, high, *scope.values))
        elif count <= scoped_bm25.MAX_ROWS:
            rows = self._rows(search_sql.scope_rows_sql(scope), scope.values)
            scores = self._ranking.rank_texts(scope.fts, terms, counts, [r[10] for r in rows])
            ranked = [(*r[:10], s, r[11]) for r, s in zip(rows, scores, strict=True) if s]
        else:
            return None
        self._postings.charge(scope.fts, indexed, terms, counts, time.perf_counter() - started)
        ranked.sort(key=lambda r: (r[10], r[11]))
        return [hit_of_row(source, (*row[:10], -row[10])) for row in ranked[:k]]

    def search_vector(self, source: str, near: Near, filters: ReadFilter, k: int) -> list[Hit]:
        wide = filters.user_id is None and collection_of(source) != "custom"
        if wide:
            held = self._wide_vector(source, near, filters, k)
            if held is not None:
                return held
        started = time.perf_counter()
        table = memory_sql.vector_table(collection_of(source), near.model_id)
        sql, values = search_sql.vector_search_sql(
            source, near.model_id, self._quantization(table), filters, blob(near.vector), k
        )
        rows = self._rows(sql, values)
        if wide and self._scans is not None:
            self._scans.searched(table, time.perf_counter() - started)
        return [hit_of_row(source, row) for row in rows if row[-1] is not None]

    def _quantization(self, table: str) -> Quantization:
        """The table's own (a drifted one is searched as it is until rebuilt)."""
        shape = self._table_shape(table)
        return Quantization.NONE if shape is None else shape.quantization

    def _wide_vector(
        self, source: str, near: Near, filters: ReadFilter, k: int
    ) -> list[Hit] | None:
        """A KNN beyond one user as numpy's product over the table held in memory
        (:mod:`vector_scan`); None where sqlite-vec answers instead."""
        if self._scans is None:
            self._scans = vector_scan.VectorScans(self._conn)
        if source == STM:
            scope = search_sql.vector_scope(filters, search_sql.TURN_FIELDS)
        else:
            scope = [
                *search_sql.vector_scope(filters, search_sql.MEMORY_FIELDS),
                ("status", "active"),
            ]
        table = memory_sql.vector_table(collection_of(source), near.model_id)
        nearest = self._scans.nearest(table, near.vector, scope, k)
        if not nearest:
            return nearest
        rows = self._rows_in_scope(
            search_sql.scoped_text(source, ReadFilter()), [r for r, _ in nearest]
        )
        return [
            hit_of_row(source, (*rows[rowid], score)) for rowid, score in nearest if rowid in rows
        ]

    def search_hybrid(
        self, source: str, query: str, near: Near | None, filters: ReadFilter, k: int, pool: int
    ) -> list[Hit]:
        text_hits = self.search_text(source, query, filters, pool)
        vector_hits = [] if near is None else self.search_vector(source, near, filters, pool)
        return fuse_hits(text_hits, vector_hits, k, pool)
