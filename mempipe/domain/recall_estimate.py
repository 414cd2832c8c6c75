"""Recall@k of a whole collection, told from a sample of it: what a move's preview predicts the
recall gate will measure, before any record is moved.

The sample holds every record a labelled query names as relevant, and each other record with
the same chance ``fraction``. A relevant record is in the top k of its query's scope when fewer
than ``k`` records rank above it there: the other relevant ones above it (all in the sample,
counted exactly) and the distractors above it. The sample shows about ``fraction`` of the
distractors, too few to count the handful above a well-ranked record. So the chance ``p`` of a
distractor scoring above the record is modelled, and the number above it of the scope's
``distractors / fraction`` is binomial.

The model of ``p`` follows the model's scores. A lexical model's (hashing) are near normal:
``p`` is the normal tail, with the mean and spread of the scope's sample. A semantic model's
(MiniLM, E5) have a heavy upper tail: the nearest distractors crowd the relevant records, and
scores three spreads above the mean are ten times as common as a normal's. There ``p`` is an
exponential fitted to the scope's top tenth (peaks over a threshold). Which one a model gets is
read from the sample (:func:`heavy_tailed`). Measured on the dev set (BENCHMARKS.md, "A move
previewed"): the normal tail alone overrated MiniLM as a new model by 0.14; the exponential
alone overrated hashing-256 by 0.05-0.06; the sample's own count scaled up, and an uninformed
prior on the count, both underrated good models. A sample of the whole collection counts
exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb, erfc, exp, sqrt
from statistics import fmean, pstdev, stdev

HEAVY_Z = 3.0
HEAVY_SHARE = 0.004
"""A model's scores are heavy-tailed when more than this share of the distractors, standardized
within their scope, lie ``HEAVY_Z`` spreads above its mean: three times a normal's 0.135 %.
Measured: hashing 0.11-0.18 %, MiniLM 1.3-1.7 %, E5 1.3 %."""
TOP = 0.1
"""The share of a scope's sampled distractors the exponential tail is fitted to."""


def heavy_tailed(scopes: Sequence[Sequence[float]]) -> bool:
    """Whether the distractors' scores of these scopes (one list a query), each standardized
    within its scope, lie ``HEAVY_Z`` spreads up more often than ``HEAVY_SHARE``."""
    above = total = 0
    for scores in scopes:
        if len(scores) < 3 or (spread := pstdev(scores)) == 0:
            continue
        mean = fmean(scores)
        above += sum((score - mean) / spread > HEAVY_Z for score in scores)
        total += len(scores)
    return bool(total) and above / total > HEAVY_SHARE


def query_recall(
    relevant: Sequence[float],
    distractors: Sequence[float],
    k: int,
    fraction: float,
    named: int,
    heavy: bool = False,
) -> float:
    """A labelled query's expected recall@k over its whole scope: ``relevant``, the scores of
    the records it names that are in scope; ``distractors``, the scores of the sample's other
    records in scope; ``named``, how many records it names (one not found counts as missed,
    as the gate counts it); ``heavy``: the model's scores are heavy-tailed."""
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
        chance = _heavy_tail(score, distractors) if heavy else _tail(score, distractors)
        found += _at_most(room, round(len(distractors) / fraction), chance)
    return found / named


def _tail(score: float, distractors: Sequence[float]) -> float:
    """The chance a distractor scores above ``score``: the normal tail of the sample's."""
    spread = stdev(distractors)
    if spread == 0:
        return float(score < distractors[0])
    return 0.5 * erfc((score - fmean(distractors)) / (spread * sqrt(2)))


def _heavy_tail(score: float, distractors: Sequence[float]) -> float:
    """The chance a distractor scores above ``score``: over the top ``TOP`` of the sample's, an
    exponential with their mean excess over the threshold; below it, the normal tail."""
    ranked = sorted(distractors)
    top = ranked[int((1 - TOP) * len(ranked)) :]
    threshold = top[0]
    if len(top) < 3 or score <= threshold:
        return _tail(score, distractors)
    excess = fmean(top) - threshold
    if excess <= 0:
        return _tail(score, distractors)
    return TOP * exp(-(score - threshold) / excess)


def _at_most(room: int, trials: int, chance: float) -> float:
    """P(X <= room) for X binomial(trials, chance)."""
    return min(
        1.0,
        sum(comb(trials, j) * chance**j * (1 - chance) ** (trials - j) for j in range(room + 1)),
    )
