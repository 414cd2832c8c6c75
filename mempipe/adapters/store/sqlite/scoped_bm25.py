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
import re
from collections.abc import Sequence

import apsw

K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6
FUNCTION = "mempipe_bm25"
MAX_SPAN = 50_000
"""Widest rowid span searched this way; a wider scope is cheaper for FTS5's own ranking."""


def query_words(text: str) -> list[str]:
    """The query's words, in the order ``fts_query`` puts them in the MATCH expression."""
    return list(dict.fromkeys(re.findall(r"\w+", text.lower())))


class ScopedBm25:
    """Per connection: the tokenizer, the vocabulary tables and the ranking function."""

    def __init__(self, conn: apsw.Connection) -> None:
        self._conn = conn
        self._tokenizer = conn.fts5_tokenizer("unicode61", ["remove_diacritics", "2"])
        self._vocabularies: set[str] = set()
        self._counts: dict[tuple[str, str], int] = {}
        """Documents per term, kept while no connection has written (fts5vocab counts a term's
        documents by walking its doclist: a common word costs as much as bm25()'s own count)."""
        self._version: tuple[int, int] | None = None
        conn.register_fts5_function(FUNCTION, _bm25)

    def document_counts(self, fts_table: str, words: Sequence[str]) -> list[int] | None:
        """Documents holding each word; None when a word is not one token to the index."""
        terms = []
        for word in words:
            tokens = self._tokenizer(
                word.encode(), apsw.FTS5_TOKENIZE_QUERY, None, include_offsets=False
            )
            if len(tokens) != 1:
                return None
            terms.append(tokens[0][0])
        version = (
            self._conn.execute("PRAGMA data_version").fetchall()[0][0],
            self._conn.total_changes(),
        )
        if version != self._version:
            self._counts.clear()
            self._version = version
        lookup = f"SELECT doc FROM temp.{self._vocabulary(fts_table)} WHERE term = ?"
        for term in terms:
            if (fts_table, term) not in self._counts:
                found = self._conn.execute(lookup, (term,)).fetchall()
                self._counts[(fts_table, term)] = found[0][0] if found else 0
        return [self._counts[(fts_table, term)] for term in terms]

    def _vocabulary(self, fts_table: str) -> str:
        name = f"mempipe_vocab_{fts_table}"
        if name not in self._vocabularies:
            self._conn.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{name} "
                f"USING fts5vocab(main, {fts_table}, row)"
            )
            self._vocabularies.add(name)
        return name


def _bm25(api: apsw.FTS5ExtensionApi, *counts: int) -> float:
    """FTS5's bm25 for the current row, the document counts given as arguments in phrase
    order; the per-query figures are kept in the query's aux data."""
    figures = api.aux_data
    if figures is None:
        rows = api.row_count
        idfs = [math.log((rows - documents + 0.5) / (documents + 0.5)) for documents in counts]
        figures = api.aux_data = (
            [idf if idf > 0.0 else IDF_FLOOR for idf in idfs],
            api.column_total_size(-1) / rows,
        )
    idfs, average = figures
    length = K1 * (1 - B + B * float(api.column_size(-1)) / average)
    score = 0.0
    for phrase, idf in enumerate(idfs):
        frequency = float(sum(len(offsets) for offsets in api.phrase_locations(phrase)))
        score += idf * ((frequency * (K1 + 1.0)) / (frequency + length))
    return -1.0 * score
