"""FTS5's bm25, computed for one user's turns without scanning the whole index.

FTS5's own ``bm25()`` counts, for every query term and on every query, the documents that
contain it by walking the term's whole doclist (``xQueryPhrase``): over 100,000 long turns that
walk is most of a text search's time, however few turns the user has. Here the counts come
from the index's vocabulary (``fts5vocab``, one b-tree seek per term), the walk is limited to
the user's rowid span, and the score is FTS5's formula term for term and operation for
operation (``fts5_aux.c``: k1 = 1.2, b = 0.75, idf floored at 1e-6), so the ranking is the one
``bm25()`` gives. Where that cannot be guaranteed (a query word that the tokenizer splits, a
scope spread over the whole table) the caller keeps ``bm25()``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import apsw

from mempipe.adapters.store.sqlite.held import database_version, vocabulary
from mempipe.adapters.store.sqlite.memory_sql import TOKENIZER_ARGS

K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6
FUNCTION = "mempipe_bm25"
MAX_SPAN = 50_000
"""Widest rowid span whose match is walked; a scope spread wider is ranked from its own rows."""
MAX_ROWS = 5_000
"""Most rows ranked from their own text; a larger scope is cheaper for FTS5's own ranking."""
ROW_COST = 5
"""What ranking one row from its text costs, in matches walked inside a span (each scored by
the ranking function in Python): 58 µs against 10.4 µs for LongMemEval's turns of about 1,000
characters. A user's sessions spread over a copy of the set (39,524 turns) walk 9,300 matches
(97 ms) where ranking the user's 182 rows takes 10.5 ms."""


def idfs(rows: int, counts: Sequence[int]) -> list[float]:
    """Each phrase's idf as FTS5 computes it, floored at 1e-6."""
    found = [math.log((rows - documents + 0.5) / (documents + 0.5)) for documents in counts]
    return [idf if idf > 0.0 else IDF_FLOOR for idf in found]


def bm25(idf: Sequence[float], average: float, size: int, frequencies: Sequence[int]) -> float:
    """FTS5's bm25 of one row (negative: lower ranks first), operation for operation."""
    length = K1 * (1 - B + B * float(size) / average)
    score = 0.0
    for weight, frequency in zip(idf, frequencies, strict=True):
        score += weight * ((float(frequency) * (K1 + 1.0)) / (float(frequency) + length))
    return -1.0 * score


def index_size(conn: apsw.Connection, fts_table: str) -> tuple[int, int]:
    """The index's rows and tokens (all columns), from the averages record FTS5 keeps."""
    found = conn.execute(f"SELECT block FROM {fts_table}_data WHERE id = 1").fetchall()
    rows, *per_column = varints(found[0][0]) if found else [0]
    return rows, sum(per_column)


def span_walk_is_cheaper(rows: int, counts: Sequence[int], span: int, count: int) -> bool:
    """Whether walking the match inside a rowid span of ``span`` ids costs less than ranking
    the scope's ``count`` rows from their text: the span holds its share of each term's
    documents."""
    if span > MAX_SPAN:
        return False
    return count > MAX_ROWS or sum(counts) * span <= count * ROW_COST * max(rows, 1)


def varints(block: bytes) -> list[int]:
    """SQLite varints, as FTS5 writes its averages record."""
    values, at = [], 0
    while at < len(block):
        value = 0
        for position in range(9):
            byte = block[at]
            at += 1
            if position == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if byte < 0x80:
                break
        values.append(value)
    return values


class ScopedBm25:
    """Per connection: the tokenizer, the vocabulary tables and the ranking function."""

    def __init__(self, conn: apsw.Connection) -> None:
        self._conn = conn
        self._tokenizer = conn.fts5_tokenizer("porter", list(TOKENIZER_ARGS))
        self._vocabularies: set[str] = set()
        self._counts: dict[tuple[str, str], int] = {}
        """Documents per term, kept while no connection has written (fts5vocab counts a term's
        documents by walking its doclist: a common word costs as much as bm25()'s own count)."""
        self._version: tuple[int, int, int] | None = None
        conn.register_fts5_function(FUNCTION, _bm25)

    def terms(self, words: Sequence[str]) -> list[str] | None:
        """Each word as the index holds it; None when a word is not one token to the index."""
        terms = []
        for word in words:
            tokens = self._tokens(word, apsw.FTS5_TOKENIZE_QUERY)
            if len(tokens) != 1:
                return None
            terms.append(tokens[0])
        return terms

    def document_counts(self, fts_table: str, terms: Sequence[str]) -> list[int]:
        """Documents holding each term."""
        version = database_version(self._conn)
        if version != self._version:
            self._counts.clear()
            self._version = version
        rows = vocabulary(self._conn, fts_table, "row", self._vocabularies)
        lookup = f"SELECT doc FROM temp.{rows} WHERE term = ?"
        for term in terms:
            if (fts_table, term) not in self._counts:
                found = self._conn.execute(lookup, (term,)).fetchall()
                self._counts[(fts_table, term)] = found[0][0] if found else 0
        return [self._counts[(fts_table, term)] for term in terms]

    def rank_texts(
        self, fts_table: str, terms: Sequence[str], counts: Sequence[int], texts: Sequence[str]
    ) -> list[float | None]:
        """The bm25 of each text as if it were its row of the index (None: no term matches):
        the same tokenizer gives the same tokens, so the same frequencies and length."""
        rows, tokens = index_size(self._conn, fts_table)
        weights, average = idfs(rows, counts), tokens / rows
        scores: list[float | None] = []
        for text in texts:
            own = self._tokens(text, apsw.FTS5_TOKENIZE_DOCUMENT)
            frequencies = [own.count(term) for term in terms]
            matched = any(frequencies)
            scores.append(bm25(weights, average, len(own), frequencies) if matched else None)
        return scores

    def _tokens(self, text: str, reason: int) -> list[str]:
        found = self._tokenizer(text.encode(), reason, None, include_offsets=False)
        return [group[0] for group in found]


def _bm25(api: apsw.FTS5ExtensionApi, *counts: int) -> float:
    """FTS5's bm25 for the current row, the document counts given as arguments in phrase
    order; the per-query figures are kept in the query's aux data."""
    figures = api.aux_data
    if figures is None:
        figures = api.aux_data = (
            idfs(api.row_count, counts),
            api.column_total_size(-1) / api.row_count,
        )
    weights, average = figures
    frequencies = [
        sum(len(offsets) for offsets in api.phrase_locations(phrase))
        for phrase in range(len(weights))
    ]
    return bm25(weights, average, api.column_size(-1), frequencies)
