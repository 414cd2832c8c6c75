"""The fast plans find what the plain ones find: a user's turns or memories ranked by mempipe's
own bm25 (document counts from the index vocabulary, the walk limited to the user's id span,
the user's rows ranked from their text, or from the postings the connection holds) give the
same hits, in the same order, with the same scores, as FTS5's ``bm25()`` over the whole
index."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import orjson
import pytest

from mempipe.adapters.store.sqlite import held_postings, scoped_bm25, search_sql
from mempipe.schemas.archive import ArchiveFormat
from mempipe.schemas.search import STM, ReadFilter
from tests.helpers import ingest, semantic_memory

USERS = [f"user-{n}" for n in range(6)]
SPEAKERS = ["Caroline", "Melanie", "Jon"]


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
    word frequencies from common to rare and documents from 3 to 400 words; a third of them
    name their speaker, which the index holds beside the text."""
    rng = random.Random(7)
    words = vocabulary(rng)
    weights = [1 / (rank + 1) for rank in range(len(words))]
    rows = [
        {
            "user_id": USERS[n % len(USERS)],
            "session_id": f"s{n // 40}",
            "role": "user" if n % 2 else "assistant",
            "content": " ".join(rng.choices(words, weights, k=rng.randint(3, 400))),
            **({"name": SPEAKERS[n % 9 // 3]} if n % 3 == 0 else {}),
        }
        for n in range(3000)
    ]
    archive = tmp_path / "turns.jsonl"
    archive.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    ingest(store, archive, defaults, tmp_path, format=ArchiveFormat.TURNS)
    return store, words


def plain(
    store, query: str, filters: ReadFilter, k: int, source: str = STM
) -> list[tuple[str, float]]:
    sql, values = search_sql.text_search_sql(source, filters)
    match = search_sql.fts_query(query)
    return [(row[0], row[10]) for row in store._rows(sql, (match, *values, k))]


@pytest.fixture(params=["span", "rows", "held"])
def fast_plans(request, monkeypatch) -> list[str]:
    """Which fast plan runs: the match walked inside the user's span, the user's rows ranked
    from their own text (the postings priced out of reach), or (everything priced at nothing,
    so that a search's first asking pays for the next) the postings held. Lists each use."""
    used: list[str] = []
    if request.param != "held":
        monkeypatch.setattr(held_postings, "DOCUMENT_SECONDS", float("inf"))
    if request.param == "span":
        monkeypatch.setattr(scoped_bm25, "ROW_COST", 10**9)
    if request.param == "rows":
        monkeypatch.setattr(scoped_bm25, "MAX_SPAN", -1)
    if request.param == "held":
        monkeypatch.setattr(held_postings, "DOCUMENT_SECONDS", 0.0)
        monkeypatch.setattr(held_postings, "POSTING_SECONDS", 0.0)
        original_within = held_postings.HeldPostings.within

        def held(*args):
            found = original_within(*args)
            if found is not None:
                used.append("held")
            return found

        monkeypatch.setattr(held_postings.HeldPostings, "within", held)
        return used
    builder = "scoped_search_sql" if request.param == "span" else "scope_rows_sql"
    original = getattr(search_sql, builder)

    def counted(*args):
        used.append(request.param)
        return original(*args)

    monkeypatch.setattr(search_sql, builder, counted)
    return used


def asked(store, source: str, query: str, filters: ReadFilter, times: int) -> list:
    """The hits of the same search asked ``times`` times, each time's (id, score) list."""
    return [
        [(h.id, h.score) for h in store.search_text(source, query, filters, 10)]
        for _ in range(times)
    ]


def test_a_users_memories_rank_exactly_as_fts5_bm25_ranks_them(store, fast_plans) -> None:
    """Active memories only, private and org-visible, several users interleaved."""
    rng = random.Random(5)
    words = vocabulary(rng)
    weights = [1 / (rank + 1) for rank in range(len(words))]
    with store.write_transaction():
        for n in range(1200):
            text = " ".join(rng.choices(words, weights, k=rng.randint(3, 60)))
            visibility = "org" if n % 7 == 0 else "private"
            memory = semantic_memory(f"m{n}", text, USERS[n % len(USERS)], visibility=visibility)
            store.add_memory("semantic", memory, None)
            if n % 11 == 0:
                store.supersede_memory("semantic", f"m{n}")
    queries = [" ".join(rng.sample(words[:40], 2) + rng.sample(words[40:], 3)) for _ in range(10)]
    for user, query, visibility in itertools.product(USERS, queries, (None, "org")):
        filters = ReadFilter(user_id=user, visibility=visibility)
        for fast in asked(store, "semantic", query, filters, 2):
            assert fast == plain(store, query, filters, 10, "semantic"), (user, query)
    assert len(fast_plans) >= len(USERS) * len(queries) * 2


def test_a_users_turns_rank_exactly_as_fts5_bm25_ranks_them(turns, fast_plans) -> None:
    store, words = turns
    rng = random.Random(11)
    queries = [" ".join(rng.sample(words[:60], 2) + rng.sample(words[60:], 4)) for _ in range(15)]
    queries += [words[0], "café naïve 2023 x", "nothing matches zzzzzzzzzz"]
    queries += [f"{speaker} {words[70]}" for speaker in SPEAKERS]
    compared = 0
    for user, query in itertools.product(USERS, queries):
        filters = ReadFilter(user_id=user)
        for fast in asked(store, STM, query, filters, 2):
            assert fast == plain(store, query, filters, 10), (user, query)
            compared += len(fast) == 10
    assert compared >= len(USERS) * 15 * 2
    assert len(fast_plans) >= len(USERS) * len(queries), "every search took the fast plan"


def test_a_word_the_tokenizer_splits_keeps_fts5s_own_ranking(store) -> None:
    ranker = scoped_bm25.ScopedBm25(store._conn)
    assert ranker.terms(["foo_bar"]) is None
    assert ranker.terms(["café", "Naïve"]) == ["cafe", "naiv"], "folded, then stemmed"
    assert ranker.terms(["running", "Deployments"]) == ["run", "deploy"]
    assert ranker.document_counts("turns_fts", ["cafe"]) == [0]
