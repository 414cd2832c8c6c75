"""Hybrid fusion: never below its best list where the other list is empty or says nothing, a
lone text match still counts, both lists' agreement wins, and a score means something on its
own: the top hit is not 1 by construction, and a hit no leg scored is not listed."""

from __future__ import annotations

import random

from mempipe.domain.fusion import fuse_hits, fuse_scores, scaled
from mempipe.schemas.search import Hit

POOL = 100


def hits(scored: list[tuple[str, float]]) -> list[Hit]:
    return [Hit(id=i, source="stm", score=s, text=i, org_id="o", project_id="p") for i, s in scored]


def ranked(text, vector, k=10) -> list[str]:
    return [h.id for h in fuse_hits(hits(text), hits(vector), k, POOL)]


TEXT = [(f"t{n}", 20.0 - n * 0.15) for n in range(POOL)]
"""A full text list: 100 matches, scores falling."""


def test_an_empty_list_leaves_the_other_ones_order() -> None:
    vector = [(f"v{n}", 0.9 - n * 0.005) for n in range(POOL)]
    assert ranked(TEXT, []) == [i for i, _ in TEXT[:10]]
    assert ranked([], vector) == [i for i, _ in vector[:10]]


def test_a_list_whose_scores_do_not_vary_counts_for_nothing() -> None:
    """A degenerate embedder (every record equally near): its list, whatever it holds, does not
    move the text list's order; reciprocal rank fusion would have put its first items on top."""
    others = [f"x{n}" for n in range(200)]
    random.Random(3).shuffle(others)
    flat = [(i, 0.5) for i in [*others[:60], *(i for i, _ in TEXT[50:90])]]
    assert ranked(TEXT, flat) == [i for i, _ in TEXT[:10]]
    assert ranked(TEXT, flat, k=10) == ranked(TEXT, [], k=10)


def test_the_only_text_match_still_counts() -> None:
    """A short text list holds every match: its last (here, only) match is scored above the
    records that did not match at all (as high as the vector list's best), so a rare name the
    text found is not lost; scaled by its own range alone it would score nothing."""
    vector = [(f"v{n}", 0.80 - n * 0.004) for n in range(POOL)]
    fused = fuse_hits(hits([("z-rare", 3.2)]), hits(vector), 3, POOL)
    assert [(h.id, round(h.score, 6)) for h in fused[:2]] == [("z-rare", 0.5), ("v0", 0.4)]


def test_agreement_of_both_lists_ranks_first() -> None:
    text = [("both", 9.0), ("text-only", 9.5), *((f"t{n}", 1.0) for n in range(50))]
    vector = [("vector-only", 0.95), ("both", 0.94), *((f"v{n}", 0.1) for n in range(50))]
    assert ranked(text, vector, k=1) == ["both"]


def test_scaling_and_ties() -> None:
    assert scaled([2.0, 4.0, 3.0]) == [0.0, 1.0, 0.5]
    assert scaled([5.0, 5.0]) == [0.0, 0.0]
    assert scaled([2.0, 4.0], floor=0.0) == [0.5, 1.0]
    assert fuse_scores([("b", 1.0), ("a", 1.0)], []) == [("a", 0.0), ("b", 0.0)], "ties by id"


def test_a_score_means_how_well_both_legs_match_not_where_it_ranks() -> None:
    """The best hit of a query its records only half match scores about half (the mean of the
    text list's share and the cosine similarity), not 1; only the best text match that is
    also the query's meaning exactly scores 1."""
    weak = fuse_hits(hits([("name", 4.0)]), hits([("name", 0.3), ("other", 0.2)]), 5, POOL)
    assert [(h.id, round(h.score, 6)) for h in weak] == [("name", 0.65), ("other", 0.1)]
    exact = fuse_hits(hits([("same", 9.0)]), hits([("same", 1.0), ("x", 0.1)]), 1, POOL)
    assert exact[0].score == 1.0


def test_a_hit_no_leg_scored_is_not_listed() -> None:
    """The weakest of a full text list scores nothing (its floor), and a vector hit of a
    negative similarity scores nothing: neither is a hit."""
    text = [(f"t{n}", 20.0 - n) for n in range(POOL)]
    vector = [("v-near", 0.6), ("v-opposite", -0.2)]
    listed = {h.id for h in fuse_hits(hits(text), hits(vector), POOL + 2, POOL)}
    assert "v-near" in listed
    assert f"t{POOL - 1}" not in listed
    assert "v-opposite" not in listed


def test_a_lone_vector_hit_counts_as_its_similarity() -> None:
    """One similarity has nothing to vary against: it is not a degenerate embedder's list, so
    the store's only vector hit is listed at half its cosine."""
    fused = fuse_hits([], hits([("only", 0.7)]), 5, POOL)
    assert [(h.id, round(h.score, 6)) for h in fused] == [("only", 0.35)]
