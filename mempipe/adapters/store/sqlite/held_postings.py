"""FTS5's bm25 over a whole table from postings held in memory, for a process that searches
beyond one user more than once.

A typical question matches most of a table of long turns (76,000 of 100,000 LongMemEval turns):
FTS5's ``bm25()`` decodes every match's position lists for every phrase (≈ 45 ms), however few
results are wanted. Here each query word's postings (the documents holding it, and how often)
are read once from the index's ``fts5vocab`` instance table and kept, the documents' sizes
once from the index's ``docsize`` table, and the score is FTS5's formula computed with numpy
over the matching documents, term for term and operation for operation as in
:mod:`scoped_bm25` (so the same scores, the same ranking). Everything held is dropped when any
connection writes to the database or changes its schema; a process's first wide search of an
index after that is FTS5's own, and the sizes are read for the next.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import apsw
import numpy as np

from mempipe.adapters.store.sqlite.held import database_version, vocabulary
from mempipe.adapters.store.sqlite.scoped_bm25 import K1, B, idfs, varints

MAX_POSTINGS = 20_000_000
"""Most (document, term) entries held across the terms kept (8 bytes each: 160 MB); the least
recently used terms are dropped first."""


@dataclass(frozen=True)
class Documents:
    """An index's documents: rowids in ascending order, each one's size in tokens (all
    columns), and the averages FTS5 ranks with."""

    rowids: np.ndarray
    sizes: np.ndarray
    rows: int
    average: float


@dataclass(frozen=True)
class Ranked:
    """The best-ranked matches as (rowid, bm25) in FTS5's order (bm25, then rowid), every match
    tied with the last one asked for included, and how many documents match in all."""

    best: list[tuple[int, float]]
    matches: int


class HeldPostings:
    """Per connection: the documents of each index read, and the postings of the terms asked."""

    def __init__(self, conn: apsw.Connection) -> None:
        self._conn = conn
        self._documents: dict[str, Documents] = {}
        self._postings: OrderedDict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._held = 0
        self._asked: set[str] = set()
        self._vocabularies: set[str] = set()
        self._version: tuple[int, int, int] | None = None

    def best(self, fts: str, terms: Sequence[str], n: int) -> Ranked | None:
        """The ``n`` best-ranked matches of the OR of ``terms``; None where FTS5 should rank
        instead (the index's first wide search since the database changed, or postings that
        name a document the sizes read before did not: a write landed between the two)."""
        self._drop_if_changed()
        documents = self._documents.get(fts)
        if documents is None:
            if fts not in self._asked:
                self._asked.add(fts)
                return None
            documents = self._documents[fts] = self._read_documents(fts)
        if documents.rows == 0:
            return Ranked([], 0)
        postings = [self._term_postings(fts, term, documents) for term in terms]
        if any(held is None for held in postings):
            return None
        weights = idfs(documents.rows, [len(index) for index, _ in postings])
        score = np.zeros(len(documents.rowids), dtype=np.float64)
        matched = np.zeros(len(documents.rowids), dtype=bool)
        for weight, (index, frequency) in zip(weights, postings, strict=True):
            if not len(index):
                continue
            length = K1 * (1 - B + B * documents.sizes[index] / documents.average)
            score[index] += weight * ((frequency * (K1 + 1.0)) / (frequency + length))
            matched[index] = True
        found = np.nonzero(matched)[0]
        matches = len(found)
        ranks = -1.0 * score[found]
        if matches > n:
            cut = ranks[np.argpartition(ranks, n - 1)[:n]].max()
            found, ranks = found[ranks <= cut], ranks[ranks <= cut]
        order = np.lexsort((documents.rowids[found], ranks))
        return Ranked([(int(documents.rowids[found[i]]), float(ranks[i])) for i in order], matches)

    def _drop_if_changed(self) -> None:
        version = database_version(self._conn)
        if version != self._version:
            self._documents.clear()
            self._postings.clear()
            self._held = 0
            self._asked.clear()
            self._version = version

    def _read_documents(self, fts: str) -> Documents:
        found = self._conn.execute(f"SELECT block FROM {fts}_data WHERE id = 1").fetchall()
        rows, *per_column = varints(found[0][0]) if found else [0]
        pairs = self._conn.execute(f"SELECT id, sz FROM {fts}_docsize ORDER BY id").fetchall()
        rowids = np.fromiter((pair[0] for pair in pairs), dtype=np.int64, count=len(pairs))
        sizes = np.fromiter(
            (sum(varints(pair[1])) for pair in pairs), dtype=np.float64, count=len(pairs)
        )
        return Documents(rowids, sizes, rows, sum(per_column) / rows if rows else 1.0)

    def _term_postings(
        self, fts: str, term: str, documents: Documents
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The documents holding the term (as positions in ``documents``) and how often; None
        when one of them is not among ``documents``."""
        key = (fts, term)
        if key in self._postings:
            self._postings.move_to_end(key)
            return self._postings[key]
        instances = vocabulary(self._conn, fts, "instance", self._vocabularies)
        lookup = f"SELECT doc FROM temp.{instances} WHERE term = ?"
        occurrences = [row[0] for row in self._conn.execute(lookup, (term,))]
        docs, frequency = np.unique(np.asarray(occurrences, dtype=np.int64), return_counts=True)
        index = np.searchsorted(documents.rowids, docs)
        if len(docs) and (
            index[-1] >= len(documents.rowids) or not (documents.rowids[index] == docs).all()
        ):
            return None
        held = (index.astype(np.int32), frequency.astype(np.int32))
        self._postings[key] = held
        self._held += len(docs)
        while self._held > MAX_POSTINGS and len(self._postings) > 1:
            _, (dropped, _) = self._postings.popitem(last=False)
            self._held -= len(dropped)
        return held
