"""Consecutive small batches share a transaction up to a number of records; a larger batch is
a group of its own, and with no number given every batch is."""

from __future__ import annotations

from mempipe.adapters.store.sqlite.pipeline import shared


def groups(sizes: list[int], up_to: int) -> list[list[int]]:
    batches = [(["t"] * size, f"b{n}") for n, size in enumerate(sizes)]
    found = []
    for group, contexts in shared(batches, up_to):
        assert len(group) == len(contexts)
        found.append([len(batch) for batch in group])
    return found


def test_small_batches_share_a_group_up_to_the_number() -> None:
    assert groups([2, 2, 2, 2, 2], 5) == [[2, 2], [2, 2], [2]]
    assert groups([2, 3, 1], 5) == [[2, 3], [1]]


def test_a_batch_larger_than_the_number_is_a_group_of_its_own() -> None:
    assert groups([2, 9, 2], 5) == [[2], [9], [2]]


def test_without_a_number_every_batch_is_its_own_group() -> None:
    assert groups([2, 0, 3], 0) == [[2], [0], [3]]


def test_each_batch_keeps_what_came_beside_it_in_order() -> None:
    batches = [(["t"], n) for n in range(7)]
    contexts = [c for _, group_contexts in shared(batches, 3) for c in group_contexts]
    assert contexts == list(range(7))
