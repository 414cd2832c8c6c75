"""Hybrid retrieval's fusion: the mean of the two legs' scores, each on [0, 1] — the text
list's scaled by its own range (min-max), the vector list's its cosine similarity as it is (a
negative one counting as none), an item missing from a list scoring that list's nothing.

So a hybrid score is 1 only for the best text match of the candidates that is also the query's
meaning exactly; the best hit of a query that only half matches scores about half, never 1 by
construction. A text list shorter than the pool asked for holds every match, so its floor is the
score of a record that did not match (zero): its last match still counts for something. A
vector list of several similarities that do not vary at all (a degenerate embedder) says
nothing about order and counts for nothing; a single one counts as it is. A hit that no leg
scored is not listed.

Why these scales: on the LongMemEval development set (BENCHMARKS.md, "Retrieval quality"),
recall@10 of hybrid search was 0.863 with both lists min-max scaled (the top hit always 1) and
0.881 with the cosine kept as it is; reciprocal rank fusion, which throws the scores away, was
below both.
"""

from __future__ import annotations

from collections.abc import Sequence

from mempipe.schemas.search import Hit

TEXT_WEIGHT = 0.5
"""The text list's share of a fused score; the vector list has the rest."""


def scaled(scores: Sequence[float], floor: float | None = None) -> list[float]:
    """Scores mapped onto [0, 1] from ``floor`` (default: their minimum) to their maximum; all
    0 when nothing separates them."""
    if not scores:
        return []
    low, high = min(scores) if floor is None else floor, max(scores)
    if high <= low:
        return [0.0] * len(scores)
    return [(score - low) / (high - low) for score in scores]


def similarities(scores: Sequence[float]) -> list[float]:
    """Cosine similarities as a leg's share: as they are, a negative one none; all none when
    two or more do not vary at all (they say nothing about order)."""
    if len(scores) > 1 and max(scores) <= min(scores):
        return [0.0] * len(scores)
    return [min(1.0, max(0.0, score)) for score in scores]


def fuse_scores(
    text: Sequence[tuple[str, float]],
    vector: Sequence[tuple[str, float]],
    *,
    text_complete: bool = False,
) -> list[tuple[str, float]]:
    """Items of both lists by fused score, best first; ties by id. ``text_complete``: the text
    list holds every match, so every other record's text score is zero."""
    fused: dict[str, float] = {}
    legs = (
        (text, TEXT_WEIGHT, scaled([s for _, s in text], 0.0 if text_complete else None)),
        (vector, 1.0 - TEXT_WEIGHT, similarities([s for _, s in vector])),
    )
    for ranking, weight, shares in legs:
        for (item, _), share in zip(ranking, shares, strict=True):
            fused[item] = fused.get(item, 0.0) + weight * share
    return sorted(fused.items(), key=lambda pair: (-pair[1], pair[0]))


def fuse_hits(text_hits: Sequence[Hit], vector_hits: Sequence[Hit], k: int, pool: int) -> list[Hit]:
    """The top ``k`` of both hit lists (each asked for ``pool``), scored by the fused score;
    none that no leg scored."""
    by_id = {h.id: h for h in (*vector_hits, *text_hits)}
    fused = fuse_scores(
        [(h.id, h.score) for h in text_hits],
        [(h.id, h.score) for h in vector_hits],
        text_complete=len(text_hits) < pool,
    )
    return [by_id[i].model_copy(update={"score": score}) for i, score in fused[:k] if score > 0]
