"""A move's preview predicts recall@k over the whole collection from a sample of it
(``domain.recall_estimate``): exactly when the sample is everything, and close to the truth on
average when it is a tenth."""

from __future__ import annotations

import random

from mempipe.domain.recall_estimate import query_recall


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
