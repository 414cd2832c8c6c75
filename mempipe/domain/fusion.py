"""Hybrid retrieval's fusion: each list's scores scaled to [0, 1] by its own range (min-max),
then averaged, an item missing from a list counting as that list's lowest. A text list shorter
than the pool asked for holds every match, so its floor is the score of a record that did not
match (zero): its last match still counts for something.

Why not reciprocal rank fusion: ranks throw the scores away, so a list whose scores barely
separate its items (a weak embedder, a query whose words are everywhere) weighs as much as a
confident one, and the fusion fell below the text list alone (BENCHMARKS.md, "Retrieval
quality"). A list whose scores do not vary at all says nothing about order and counts for
nothing; an empty list leaves the other one's order as it is.
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
        (text, TEXT_WEIGHT, 0.0 if text_complete else None),
        (vector, 1.0 - TEXT_WEIGHT, None),
    )
    for ranking, weight, floor in legs:
        for (item, _), value in zip(ranking, scaled([s for _, s in ranking], floor), strict=True):
            fused[item] = fused.get(item, 0.0) + weight * value
    return sorted(fused.items(), key=lambda pair: (-pair[1], pair[0]))


def fuse_hits(text_hits: Sequence[Hit], vector_hits: Sequence[Hit], k: int, pool: int) -> list[Hit]:
    """The top ``k`` of both hit lists (each asked for ``pool``), scored by the fused score."""
    by_id = {h.id: h for h in (*vector_hits, *text_hits)}
    fused = fuse_scores(
        [(h.id, h.score) for h in text_hits],
        [(h.id, h.score) for h in vector_hits],
        text_complete=len(text_hits) < pool,
    )
    return [by_id[i].model_copy(update={"score": score}) for i, score in fused[:k]]
