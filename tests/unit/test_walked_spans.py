"""Where a user's search walks the match: the user's runs of consecutive rowids, two runs joined
only where walking the rows between them costs less than starting another walk."""

from __future__ import annotations

import numpy as np

from mempipe.adapters.store.sqlite.scoped_bm25 import SPAN_COST, walk_cost, walked_spans

RUNS = np.array([10, 11, 12, 20, 21, 5000, 5001, 5002])


def test_runs_far_apart_are_walked_apart_and_runs_close_by_together() -> None:
    # every row holds a query word: a gap of 7 rows costs 7 matches, under a walk's start
    assert walked_spans(RUNS, rows=10_000, counts=[10_000]) == [(10, 21), (5000, 5002)]


def test_rare_words_join_every_run_into_one_walk() -> None:
    assert walked_spans(RUNS, rows=10_000, counts=[1]) == [(10, 5002)]


def test_common_words_keep_every_run_apart() -> None:
    assert walked_spans(RUNS, rows=10, counts=[10, 10, 10]) == [(10, 12), (20, 21), (5000, 5002)]


def test_a_walk_costs_its_starts_and_its_share_of_the_matches() -> None:
    assert walk_cost([(10, 21), (5000, 5002)], rows=10_000, counts=[10_000]) == 2 * SPAN_COST + 15
    assert walked_spans(np.array([], dtype=np.int64), rows=10, counts=[1]) == []
