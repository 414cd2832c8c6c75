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

Searches within one user use what is held too, and pay for it as the held vectors are paid
for (ski rental): the time each of their other plans takes is charged to the sizes and to each
term they lacked, and what has been charged as much as reading it is estimated to cost is read
before the next one. A process that keeps asking about the same words comes to rank a user's
rows from memory; one that asks about a word once never reads its postings.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import apsw
import numpy as np

from mempipe.adapters.store.sqlite.held import database_version, vocabulary
from mempipe.adapters.store.sqlite.scoped_bm25 import K1, B, idfs, index_size, varints

MAX_POSTINGS = 20_000_000
"""Most (document, term) entries held across the terms kept (8 bytes each: 160 MB); the least
recently used terms are dropped first."""
DOCUMENT_SECONDS = 3e-6
"""Reading one document's size (100,000 LongMemEval turns: 280 ms)."""
POSTING_SECONDS = 1.7e-6
"""Reading one document of a term's postings (99 terms of 10,000 documents each: 17 ms a term)."""


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
        self._charged: dict[tuple[str, str | None], float] = {}
        """Seconds the searches within one user spent on other plans, for want of an index's
        sizes (term None) or a term's postings."""
        self._prices: dict[tuple[str, str | None], float] = {}
        """What reading each of them is estimated to cost."""

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

    def ready(self, fts: str, terms: Sequence[str]) -> bool:
        """Whether the index's sizes and every term's postings are held, once those the
        searches within one user have paid for are read."""
        self._drop_if_changed()
        if fts not in self._documents:
            if not self._paid((fts, None)):
                return False
            self._documents[fts] = self._read_documents(fts)
        documents = self._documents[fts]
        for term in terms:
            key = (fts, term)
            if key not in self._postings and not (
                self._paid(key) and self._term_postings(fts, term, documents) is not None
            ):
                return False
        return True

    def within(
        self, fts: str, terms: Sequence[str], rowids: np.ndarray
    ) -> list[tuple[int, float]] | None:
        """The matches among ``rowids`` (a scope's rows, ascending) as (rowid, bm25) in FTS5's
        order, from what :meth:`ready` holds; None when a rowid is not among the sizes held (a
        write landed since they were read)."""
        documents = self._documents[fts]
        positions = np.searchsorted(documents.rowids, rowids)
        if len(rowids) and (
            positions[-1] >= len(documents.rowids) or (documents.rowids[positions] != rowids).any()
        ):
            return None
        inside = np.zeros(len(documents.rowids), dtype=bool)
        inside[positions] = True
        postings = [self._postings[(fts, term)] for term in terms]
        weights = idfs(documents.rows, [len(index) for index, _ in postings])
        score = np.zeros(len(positions), dtype=np.float64)
        matched = np.zeros(len(positions), dtype=bool)
        for weight, (index, frequency) in zip(weights, postings, strict=True):
            keep = inside[index]
            found, times = index[keep], frequency[keep]
            slots = np.searchsorted(positions, found)
            length = K1 * (1 - B + B * documents.sizes[found] / documents.average)
            score[slots] += weight * ((times * (K1 + 1.0)) / (times + length))
            matched[slots] = True
        hits = np.nonzero(matched)[0]
        ranks = -1.0 * score[hits]
        order = np.lexsort((rowids[hits], ranks))
        return [(int(rowids[hits[i]]), float(ranks[i])) for i in order]

    def charge(
        self, fts: str, rows: int, terms: Sequence[str], counts: Sequence[int], seconds: float
    ) -> None:
        """Charge a search within one user that could not rank from memory with the time its
        plan took, against the sizes (of ``rows`` documents) and each term's postings it
        lacked."""
        self._drop_if_changed()
        wanted: list[tuple[tuple[str, str | None], float]] = []
        if fts not in self._documents:
            wanted.append(((fts, None), rows * DOCUMENT_SECONDS))
        wanted += [
            ((fts, term), count * POSTING_SECONDS)
            for term, count in zip(terms, counts, strict=True)
            if (fts, term) not in self._postings
        ]
        for key, price in wanted:
            self._charged[key] = self._charged.get(key, 0.0) + seconds
            self._prices[key] = price

    def _paid(self, key: tuple[str, str | None]) -> bool:
        return key in self._prices and self._charged[key] >= self._prices[key]

    def _drop_if_changed(self) -> None:
        version = database_version(self._conn)
        if version != self._version:
            self._documents.clear()
            self._postings.clear()
            self._held = 0
            self._asked.clear()
            self._charged.clear()
            self._prices.clear()
            self._version = version

    def _read_documents(self, fts: str) -> Documents:
        rows, tokens = index_size(self._conn, fts)
        pairs = self._conn.execute(f"SELECT id, sz FROM {fts}_docsize ORDER BY id").fetchall()
        rowids = np.fromiter((pair[0] for pair in pairs), dtype=np.int64, count=len(pairs))
        sizes = np.fromiter(
            (sum(varints(pair[1])) for pair in pairs), dtype=np.float64, count=len(pairs)
        )
        return Documents(rowids, sizes, rows, tokens / rows if rows else 1.0)

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
