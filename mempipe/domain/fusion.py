"""Reciprocal rank fusion: hybrid retrieval ranks by the sum of 1 / (k + rank) over the text
and vector result lists, so a record found by only one of them (say, one without a vector)
still ranks."""

from __future__ import annotations

from collections.abc import Sequence

from mempipe.schemas.search import Hit

RRF_K = 60


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], k: int = RRF_K
) -> list[tuple[str, float]]:
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def fuse_hits(text_hits: Sequence[Hit], vector_hits: Sequence[Hit], k: int) -> list[Hit]:
    """The top ``k`` of both hit lists by reciprocal rank fusion, each scored by its fused
    score."""
    by_id = {h.id: h for h in (*vector_hits, *text_hits)}
    fused = reciprocal_rank_fusion([[h.id for h in text_hits], [h.id for h in vector_hits]])
    return [by_id[i].model_copy(update={"score": score}) for i, score in fused[:k]]
