"""Recall@k of a whole collection, told from a sample of it: what a move's preview predicts the
recall gate will measure, before any record is moved.

The sample holds every record a labelled query names as relevant, and each other record with
the same chance ``fraction``. A relevant record is in the top k of its query's scope when fewer
than ``k`` records rank above it there: the other relevant ones above it (all in the sample,
counted exactly) and the distractors above it. The sample shows about ``fraction`` of the
distractors, too few to count the handful above a well-ranked record: their scores are taken as
normal, with the mean and spread of the sample's, so that the chance ``p`` of a distractor
scoring above the record is the normal tail, and the number above it of the scope's
``distractors / fraction`` is binomial. Measured on the dev set against other ways (BENCHMARKS.md,
"A move previewed"): the sample's own count scaled up, and an uninformed prior on the count,
both underrate a good model. A sample of the whole collection counts exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb, erfc, sqrt
from statistics import fmean, stdev


def query_recall(
    relevant: Sequence[float], distractors: Sequence[float], k: int, fraction: float, named: int
) -> float:
    """A labelled query's expected recall@k over its whole scope: ``relevant``, the scores of
    the records it names that are in scope; ``distractors``, the scores of the sample's other
    records in scope; ``named``, how many records it names (one not found counts as missed,
    as the gate counts it)."""
    if not named:
        return 0.0
    found = 0.0
    for score in relevant:
        room = k - 1 - sum(other > score for other in relevant)
        if room < 0:
            continue
        if fraction >= 1.0 or len(distractors) < 2:
            found += float(sum(d > score for d in distractors) <= room)
            continue
        found += _at_most(room, round(len(distractors) / fraction), _tail(score, distractors))
    return found / named


def _tail(score: float, distractors: Sequence[float]) -> float:
    """The chance a distractor scores above ``score``: the normal tail of the sample's."""
    spread = stdev(distractors)
    if spread == 0:
        return float(score < distractors[0])
    return 0.5 * erfc((score - fmean(distractors)) / (spread * sqrt(2)))


def _at_most(room: int, trials: int, chance: float) -> float:
    """P(X <= room) for X binomial(trials, chance)."""
    return min(
        1.0,
        sum(comb(trials, j) * chance**j * (1 - chance) ** (trials - j) for j in range(room + 1)),
    )
