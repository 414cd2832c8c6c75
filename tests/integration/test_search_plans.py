"""The fast plans find what the plain ones find: a user's turns ranked by mempipe's own bm25
(document counts from the index vocabulary, the walk limited to the user's id span) give the
same hits, in the same order, with the same scores, as FTS5's ``bm25()`` over the whole index."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import orjson
import pytest

from mempipe.adapters.store.sqlite import scoped_bm25, search_sql
from mempipe.schemas.archive import ArchiveFormat
from mempipe.schemas.search import STM, ReadFilter
from mempipe.services.ingest import ingest_file

USERS = [f"user-{n}" for n in range(6)]


def vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(800)] + [
        "café",
        "naïve",
        "2023",
        "x",
    ]


@pytest.fixture
def turns(store, tmp_path: Path, defaults):
    """3,000 turns over six users, interleaved (one user's id span holds the others'), with
    word frequencies from common to rare and documents from 3 to 400 words."""
    rng = random.Random(7)
    words = vocabulary(rng)
    weights = [1 / (rank + 1) for rank in range(len(words))]
    rows = [
        {
            "user_id": USERS[n % len(USERS)],
            "session_id": f"s{n // 40}",
            "role": "user" if n % 2 else "assistant",
            "content": " ".join(rng.choices(words, weights, k=rng.randint(3, 400))),
        }
        for n in range(3000)
    ]
    archive = tmp_path / "turns.jsonl"
    archive.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    ingest_file(store, archive, ArchiveFormat.TURNS, defaults, run_id="r", rejects_file=tmp_path)
    return store, words


def plain(store, query: str, filters: ReadFilter, k: int) -> list[tuple[str, float]]:
    sql, values = search_sql.text_search_sql(STM, filters)
    match = search_sql.fts_query(query)
    return [(row[0], row[9]) for row in store._rows(sql, (match, *values, k))]


def test_a_users_turns_rank_exactly_as_fts5_bm25_ranks_them(turns, monkeypatch) -> None:
    store, words = turns
    fast_plans: list[int] = []
    scoped_sql = search_sql.scoped_turn_search_sql

    def counted(filters: ReadFilter, phrases: int) -> tuple[str, list]:
        fast_plans.append(phrases)
        return scoped_sql(filters, phrases)

    monkeypatch.setattr(search_sql, "scoped_turn_search_sql", counted)
    rng = random.Random(11)
    queries = [" ".join(rng.sample(words[:60], 2) + rng.sample(words[60:], 4)) for _ in range(15)]
    queries += [words[0], "café naïve 2023 x", "nothing matches zzzzzzzzzz"]
    compared = 0
    for user, query in itertools.product(USERS, queries):
        filters = ReadFilter(user_id=user)
        fast = [(h.id, h.score) for h in store.search_text(STM, query, filters, 10)]
        assert fast == plain(store, query, filters, 10), (user, query)
        compared += len(fast) == 10
    assert compared >= len(USERS) * 15
    assert len(fast_plans) == len(USERS) * len(queries), "every search took the fast plan"


def test_a_word_the_tokenizer_splits_keeps_fts5s_own_ranking(store) -> None:
    ranker = scoped_bm25.ScopedBm25(store._conn)
    assert ranker.document_counts("turns_fts", ["foo_bar"]) is None
    assert ranker.document_counts("turns_fts", ["café"]) == [0]
