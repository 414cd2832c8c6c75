"""A move's preview predicts recall@k over the whole collection from a sample of it
(``domain.recall_estimate``): exactly when the sample is everything, and close to the truth on
average when it is a tenth."""

from __future__ import annotations

import random

from mempipe.domain.recall_estimate import heavy_tailed, query_recall


def test_a_sample_of_everything_counts_exactly() -> None:
    distractors = [0.9, 0.8, 0.7, 0.1]
    assert query_recall([0.75], distractors, 3, 1.0, 1) == 1.0, "two above: in the top 3"
    assert query_recall([0.75], distractors, 2, 1.0, 1) == 0.0, "two above: not in the top 2"
    assert query_recall([0.95, 0.75], distractors, 3, 1.0, 2) == 0.5, "the other relevant counts"
    assert query_recall([0.95], distractors, 3, 1.0, 2) == 0.5, "one named was not found"


def test_a_tenth_of_the_collection_predicts_recall_near_the_truth() -> None:
    """Scopes of 500 distractors scored normally, one relevant record each scored above most:
    the mean of the estimates from a 10 % sample is within 0.03 of the true recall@10, whose
    value is far from both ends."""
    draw = random.Random(7)
    truths, estimates = [], []
    for _ in range(300):
        scope = [draw.gauss(0.0, 1.0) for _ in range(500)]
        relevant = draw.gauss(2.3, 0.5)
        truths.append(float(sum(s > relevant for s in scope) <= 9))
        sample = [s for s in scope if draw.random() < 0.1]
        estimates.append(query_recall([relevant], sample, 10, len(sample) / 500, 1))
    truth, estimate = sum(truths) / len(truths), sum(estimates) / len(estimates)
    assert 0.3 < truth < 0.9
    assert abs(estimate - truth) < 0.03, (estimate, truth)


def _heavy(draw: random.Random) -> float:
    """A score with a heavier upper tail than a normal's: Laplace's, of unit spread (scores
    three spreads up 0.72 % of the time, against a normal's 0.135 %)."""
    return draw.choice((-1.0, 1.0)) * draw.expovariate(2**0.5)


def test_heavy_tailed_scores_are_told_from_normal_ones() -> None:
    draw = random.Random(3)
    normal = [[draw.gauss(0.0, 1.0) for _ in range(50)] for _ in range(80)]
    heavy = [[_heavy(draw) for _ in range(50)] for _ in range(80)]
    assert not heavy_tailed(normal)
    assert heavy_tailed(heavy)
    assert not heavy_tailed([]), "no scope: nothing read"


def test_a_heavy_tail_is_estimated_near_the_truth_where_a_normal_one_overrates_recall() -> None:
    """Scopes of heavy-tailed distractors: the normal tail misses the crowd above the relevant
    record and overrates recall; the exponential over the top tenth comes nearer."""
    draw = random.Random(11)
    truths, normal, heavy = [], [], []
    for _ in range(300):
        scope = [_heavy(draw) for _ in range(500)]
        relevant = draw.gauss(2.8, 0.8)
        truths.append(float(sum(s > relevant for s in scope) <= 9))
        sample = [s for s in scope if draw.random() < 0.1]
        fraction = len(sample) / 500
        normal.append(query_recall([relevant], sample, 10, fraction, 1))
        heavy.append(query_recall([relevant], sample, 10, fraction, 1, heavy=True))
    truth = sum(truths) / len(truths)
    normal_error = sum(normal) / len(normal) - truth
    heavy_error = abs(sum(heavy) / len(heavy) - truth)
    assert 0.3 < truth < 0.9
    assert normal_error > 0.05, "the normal tail overrates"
    assert heavy_error < min(normal_error, 0.05), (heavy_error, normal_error)
