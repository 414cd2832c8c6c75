"""DESIGN rule: reads AND every identity field supplied; an omitted one leaves that dimension
open; the filter is part of the database query; visibility never crosses a project. Also: a
memory without a vector is found by text and hybrid, not semantic. Checked in every mode."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from mempipe.adapters.embedding.hashing import HashingEmbedder
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.memory import SemanticMemory
from mempipe.schemas.search import ReadFilter, SearchMode
from mempipe.services.search import SearchError, search

EMBEDDER = HashingEmbedder(64)
MODES = list(SearchMode)
NOW = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def held_from_the_second_wide_search(monkeypatch):
    """A process's first wide vector search is sqlite-vec's, its next from the vectors then
    held: reading a table is made to cost less than any search (by default it waits until
    sqlite-vec's searches have cost as much as reading the table), so both paths are compared."""
    from mempipe.adapters.store.sqlite import vector_scan

    monkeypatch.setattr(vector_scan, "READ_SECONDS_PER_ROW", 1e-12)


def remember(
    store, memory_id, text, *, project="p1", user="u1", visibility="private", embed=True
) -> None:
    record = SemanticMemory(
        id=memory_id,
        org_id="o",
        project_id=project,
        user_id=user,
        visibility=visibility,
        text=text,
        label=memory_id,
        has_embedding=embed,
        embedding_model_id=EMBEDDER.model_id if embed else None,
        created_at=NOW,
        updated_at=NOW,
    )
    if embed:
        store.ensure_vector_table("semantic", EMBEDDER.model_id, EMBEDDER.dimensions)
    with store.write_transaction():
        store.add_memory("semantic", record, EMBEDDER.embed([text])[0] if embed else None)


@pytest.fixture
def memories(store):
    remember(store, "u1-private", "refund policy for user one")
    remember(store, "u1-org", "refund policy shared by user one", visibility="org")
    remember(store, "u2-private", "refund policy for user two", user="u2")
    remember(store, "u2-org", "refund policy shared by user two", user="u2", visibility="org")
    remember(store, "p2-org", "refund policy in another project", project="p2", visibility="org")
    return store


def hits(store, mode, top_k=10, query="refund policy", **filters) -> list[tuple[str, float]]:
    result = search(
        UnitOfWork(store), lambda _: EMBEDDER, query, "semantic", mode, ReadFilter(**filters), top_k
    )
    return [(hit.id, round(hit.score, 5)) for hit in result.hits]


def ids(store, mode, top_k=10, query="refund policy", **filters) -> set[str]:
    """The ids found, asked twice: a store answers a process's first search beyond one user
    through sqlite-vec and the next from the vectors it then holds in memory, and both must
    give the same hits."""
    first = hits(store, mode, top_k, query, **filters)
    assert hits(store, mode, top_k, query, **filters) == first
    return {memory_id for memory_id, _ in first}


@pytest.mark.parametrize("mode", MODES)
def test_supplied_fields_are_anded_never_ored(memories, mode) -> None:
    assert ids(memories, mode, org_id="o", project_id="p1", user_id="u1", visibility="org") == {
        "u1-org"
    }


@pytest.mark.parametrize("mode", MODES)
def test_an_omitted_field_leaves_that_dimension_open(memories, mode) -> None:
    assert ids(memories, mode, org_id="o", project_id="p1", visibility="org") == {
        "u1-org",
        "u2-org",
    }
    assert ids(memories, mode, org_id="o", project_id="p1", user_id="u2") == {
        "u2-private",
        "u2-org",
    }


@pytest.mark.parametrize("mode", MODES)
def test_org_visibility_never_crosses_a_project(memories, mode) -> None:
    assert "p2-org" not in ids(memories, mode, org_id="o", project_id="p1", visibility="org")
    assert ids(memories, mode, org_id="o", project_id="p2") == {"p2-org"}


@pytest.mark.parametrize("mode", MODES)
def test_the_filter_is_in_the_query_not_applied_to_its_results(store, mode) -> None:
    """The nearest records all belong to someone else: a filter applied after a top-k would
    return nothing; one inside the query returns the user's own, ranked."""
    for n in range(20):
        remember(store, f"other-{n}", "refund policy refund policy", user="other")
    remember(store, "mine-1", "refund policy for travel", user="me")
    remember(store, "mine-2", "a refund policy note", user="me")
    assert ids(store, mode, top_k=2, org_id="o", user_id="me") == {"mine-1", "mine-2"}


def test_a_wide_scope_is_filtered_inside_the_knn_held_in_memory(store) -> None:
    """Beyond one user the KNN runs over the vectors held in memory; the scope is still a
    filter inside it: twenty nearer records of another project leave the two of this one."""
    for n in range(20):
        remember(store, f"p1-{n}", "refund policy refund policy", user=f"u{n}", visibility="org")
    remember(store, "p9-1", "refund policy for travel", project="p9", visibility="org")
    remember(store, "p9-2", "a refund policy note", project="p9", user="u2", visibility="org")
    semantic = SearchMode.SEMANTIC
    through_sqlite_vec = hits(store, semantic, top_k=2, org_id="o", project_id="p9")
    held = hits(store, semantic, top_k=2, org_id="o", project_id="p9")
    assert held == through_sqlite_vec
    assert {memory_id for memory_id, _ in held} == {"p9-1", "p9-2"}
    assert len(hits(store, semantic, top_k=30, org_id="o")) == 22


def test_a_wide_text_search_reaches_a_scope_behind_better_matches_elsewhere(
    store, monkeypatch
) -> None:
    """Beyond one user the best-ranked matches are joined to the scope first; a scope whose
    rows rank behind all of those is still found, ranked as FTS5 ranks it."""
    from mempipe.adapters.store.sqlite import search as sqlite_search

    monkeypatch.setattr(sqlite_search, "RANKED_FIRST", 5)
    for n in range(20):
        remember(store, f"p1-{n}", "refund policy refund policy", user=f"u{n}", visibility="org")
    remember(store, "p9-1", "a long note that mentions a refund once", project="p9")
    remember(store, "p9-2", "another long note on a policy", project="p9", user="u2")
    text = SearchMode.TEXT
    assert {m for m, _ in hits(store, text, top_k=2, org_id="o", project_id="p9")} == {
        "p9-1",
        "p9-2",
    }
    assert [m for m, _ in hits(store, text, top_k=3, org_id="o")][:3] == ["p1-0", "p1-1", "p1-2"]


def test_a_wide_text_search_from_held_postings_ranks_exactly_as_fts5(store) -> None:
    """Beyond one user, a process's later text searches rank from the postings it holds:
    the same hits, in the same order, with the same scores as FTS5's own ``bm25()``."""
    import random

    from mempipe.adapters.store.sqlite import search_sql

    words = [
        "refund",
        "policy",
        "travel",
        "visa",
        "lisbon",
        "hotel",
        "booking",
        "receipt",
        "manager",
        "approval",
    ]
    rng = random.Random(7)
    for n in range(60):
        text = " ".join(rng.choices(words, k=rng.randint(2, 30)))
        remember(store, f"m{n}", text, user=f"u{n % 7}", project=f"p{n % 2}")
    fts_ranking = search_sql.text_search_sql("semantic", ReadFilter(org_id="o", project_id="p1"))
    for query in ("refund policy", "visa for lisbon", "hotel booking receipt", "manager"):
        filters = {"org_id": "o", "project_id": "p1"}
        first = hits(store, SearchMode.TEXT, top_k=10, query=query, **filters)
        held = hits(store, SearchMode.TEXT, top_k=10, query=query, **filters)
        sql, values = fts_ranking
        match = search_sql.fts_query(query)
        own = [(row[0], round(row[-1], 5)) for row in store._rows(sql, (match, *values, 10))]
        assert held == first == own
    assert store._postings.best("memories_semantic_fts", ["refund"], 5) is not None, (
        "the later searches ranked from the held postings"
    )


def test_a_table_is_read_into_memory_once_sqlite_vec_has_cost_as_much(store, monkeypatch) -> None:
    """Ski rental: sqlite-vec answers while its wide searches since the last change have cost
    less than reading the table would; then the table is held; a write starts over."""
    from mempipe.adapters.store.sqlite import memory_sql, vector_scan

    monkeypatch.setattr(vector_scan, "READ_SECONDS_PER_ROW", 1.0)
    for n in range(3):
        remember(store, f"m{n}", f"refund policy {n}", user=f"u{n}")
    table = memory_sql.vector_table("semantic", EMBEDDER.model_id)
    scans = vector_scan.VectorScans(store._conn)
    query, scope = EMBEDDER.embed(["refund"])[0], [("org_id", "o")]
    assert scans.nearest(table, query, scope, 2) is None, "3 rows cost 3 s to read"
    scans.searched(table, 1.0)
    assert scans.nearest(table, query, scope, 2) is None
    scans.searched(table, 2.5)
    assert len(scans.nearest(table, query, scope, 2)) == 2, "3.5 s spent: read and held"
    remember(store, "m3", "refund policy 3", user="u3")
    assert scans.nearest(table, query, scope, 2) is None, "a write starts over"


def test_a_users_text_search_holds_postings_once_its_other_plans_have_cost_as_much(
    store, monkeypatch
) -> None:
    """Ski rental within one user: the sizes and each word's postings are read once the
    searches that lacked them have spent what reading them costs; a word asked less stays
    unread; a write starts over."""
    from mempipe.adapters.store.sqlite import held_postings, memory_sql

    monkeypatch.setattr(held_postings, "DOCUMENT_SECONDS", 1.0)
    monkeypatch.setattr(held_postings, "POSTING_SECONDS", 1.0)
    for n in range(3):
        remember(store, f"m{n}", f"refund policy {n}", user="u1")
    held = held_postings.HeldPostings(store._conn)
    table = memory_sql.table("semantic")
    fts = f"{table}_fts"
    assert not held.ready(fts, ["refund"])
    held.charge(fts, 3, ["refund", "polici"], [3, 3], 2.0)
    assert not held.ready(fts, ["refund"]), "3 documents cost 3 s to read, 2 s spent"
    held.charge(fts, 3, ["refund"], [3], 1.5)
    assert held.ready(fts, ["refund"]), "3.5 s spent on the sizes and on 'refund'"
    assert not held.ready(fts, ["polici"]), "'polici' was charged 2 s of 3"
    rows = store._rows(f"SELECT rowid FROM {table} ORDER BY rowid")
    rowids = np.asarray([rowid for (rowid,) in rows])
    assert [rowid for rowid, _ in held.within(fts, ["refund"], rowids)] == rowids.tolist()
    remember(store, "m3", "refund policy 3", user="u1")
    assert not held.ready(fts, ["refund"]), "a write starts over"


def test_a_zero_vector_held_in_memory_scores_nothing_rather_than_nan(store) -> None:
    """A vector of zeros (a text the hashing embedder finds no feature in) cannot be scaled
    to unit length: held, it stays zero, so it ranks last instead of poisoning the scan."""
    from mempipe.adapters.store.sqlite import memory_sql, vector_scan

    remember(store, "m1", "refund policy", user="u1")
    remember(store, "m2", "refund policy again", user="u2")
    table = memory_sql.vector_table("semantic", EMBEDDER.model_id)
    with store.write_transaction():
        store._conn.execute(
            f"UPDATE {table} SET embedding = ? WHERE memory_rowid = "
            f"(SELECT rowid FROM {memory_sql.table('semantic')} WHERE id = 'm2')",
            (np.zeros(EMBEDDER.dimensions, dtype=np.float32).tobytes(),),
        )
    scans = vector_scan.VectorScans(store._conn)
    scans.searched(table, float("inf"))
    query = EMBEDDER.embed(["refund policy"])[0]
    (first, _), (last, score) = scans.nearest(table, query, [("org_id", "o")], 2)
    rowid_of = dict(store._rows(f"SELECT id, rowid FROM {memory_sql.table('semantic')}"))
    assert (first, last, score) == (rowid_of["m1"], rowid_of["m2"], 0.0)


def test_a_write_drops_the_vectors_held_in_memory(store) -> None:
    remember(store, "first", "refund policy one", user="u1")
    remember(store, "second", "refund policy two", user="u2")
    for _ in range(2):
        assert len(hits(store, SearchMode.SEMANTIC, org_id="o")) == 2
    remember(store, "third", "refund policy three", user="u3")
    for _ in range(2):
        assert {m for m, _ in hits(store, SearchMode.SEMANTIC, org_id="o")} == {
            "first",
            "second",
            "third",
        }


def test_a_memory_without_a_vector_is_found_by_text_and_hybrid_not_semantic(store) -> None:
    remember(store, "embedded", "passport renewal checklist")
    remember(store, "unembedded", "passport expiry reminder", embed=False)
    assert "unembedded" in ids(store, SearchMode.TEXT, query="passport")
    assert "unembedded" in ids(store, SearchMode.HYBRID, query="passport")
    assert "unembedded" not in ids(store, SearchMode.SEMANTIC, query="passport")


def test_turns_are_searched_by_text_with_their_source_message_id(
    store, fixtures, defaults, tmp_path
) -> None:
    from tests.helpers import ingest

    ingest(store, fixtures / "turns.jsonl", defaults, tmp_path / "r.jsonl")
    result = search(
        UnitOfWork(store),
        lambda _: EMBEDDER,
        "recovery objective",
        "stm",
        SearchMode.TEXT,
        ReadFilter(user_id="u-2"),
        5,
    )
    assert [(h.message_id, h.session_id) for h in result.hits] == [("m-4", "sess-b")]
    with pytest.raises(SearchError, match="no vectors"):
        search(
            UnitOfWork(store), lambda _: EMBEDDER, "x", "stm", SearchMode.SEMANTIC, ReadFilter(), 5
        )


def test_a_query_embedder_of_another_dimension_is_refused_naming_both(memories) -> None:
    with pytest.raises(SearchError, match=r"hashing-32 gives 32 dimensions .* hashing-64 at 64"):
        search(
            UnitOfWork(memories),
            lambda _: HashingEmbedder(32),
            "refund",
            "semantic",
            SearchMode.SEMANTIC,
            ReadFilter(),
            5,
        )


def test_a_declared_custom_type_is_a_search_source_of_its_own(store) -> None:
    from mempipe.schemas.config import CustomTypeConfig
    from mempipe.schemas.memory import CustomMemory

    store.declare([], [CustomTypeConfig(name="ticket"), CustomTypeConfig(name="incident")])
    store.ensure_vector_table("custom", EMBEDDER.model_id, EMBEDDER.dimensions)
    for memory_id, kind, text in [
        ("t1", "ticket", "refund request for order 4411"),
        ("i1", "incident", "refund service outage"),
    ]:
        record = CustomMemory(
            id=memory_id,
            org_id="o",
            project_id="p",
            type_name=kind,
            text=text,
            has_embedding=True,
            embedding_model_id=EMBEDDER.model_id,
            created_at=NOW,
            updated_at=NOW,
        )
        with store.write_transaction():
            store.add_memory("custom", record, EMBEDDER.embed([text])[0])
    for mode in MODES:
        result = search(
            UnitOfWork(store), lambda _: EMBEDDER, "refund", "ticket", mode, ReadFilter(), 5
        )
        assert [h.id for h in result.hits] == ["t1"], mode
    with pytest.raises(SearchError, match=r"known: stm, semantic, .*incident, ticket"):
        search(
            UnitOfWork(store),
            lambda _: EMBEDDER,
            "refund",
            "complaint",
            SearchMode.TEXT,
            ReadFilter(),
            5,
        )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_an_empty_query_is_refused_in_every_mode(memories, mode, query) -> None:
    """Before this rule, semantic and hybrid answered a blank query with arbitrary records."""
    with pytest.raises(SearchError, match="the query is empty"):
        ids(memories, mode, query=query)


def test_a_query_of_only_stop_words_says_so(memories) -> None:
    with pytest.raises(SearchError, match="holds only stop words"):
        ids(memories, SearchMode.TEXT, query="is it the")
    remember(memories, "near-in-meaning", "what it is")
    result = search(
        UnitOfWork(memories),
        lambda _: EMBEDDER,
        "is it the",
        "semantic",
        SearchMode.HYBRID,
        ReadFilter(),
        5,
    )
    assert result.notes == ["'is it the' holds only stop words: ranked by meaning alone"]
    assert [h.id for h in result.hits] == ["near-in-meaning"], "the vector list still answers"


def test_stop_words_do_not_make_a_text_match(memories) -> None:
    remember(memories, "stop-only", "it is the one")
    assert "stop-only" not in ids(memories, SearchMode.TEXT, query="the refund")
    assert "u1-private" in ids(memories, SearchMode.TEXT, query="the refund")


def test_words_match_their_stemmed_forms(memories) -> None:
    remember(memories, "stemmed", "she was running the deployments")
    assert "stemmed" in ids(memories, SearchMode.TEXT, query="deployment")
    assert "stemmed" in ids(memories, SearchMode.TEXT, query="runs")
