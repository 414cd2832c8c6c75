"""The bridge's map (:mod:`mempipe.domain.bridge`): fitted on pairs, it carries a vector of one
model's space into the other's, and its bytes round-trip."""

from __future__ import annotations

import numpy as np

from mempipe.domain import bridge


def test_an_affine_map_finds_a_rotation_and_a_change_of_size_from_pairs() -> None:
    rng = np.random.default_rng(0)
    source = rng.normal(size=(400, 24))
    turn = rng.normal(size=(24, 16))
    target = source @ turn
    weights = bridge.fit_affine(source, target, ridge=1e-6)
    unseen = rng.normal(size=(50, 24))
    mapped = bridge.apply_map(weights, unseen)
    expected = bridge.unit(unseen @ turn)
    assert mapped.shape == (50, 16)
    assert np.allclose(np.linalg.norm(mapped, axis=1), 1.0, atol=1e-5)
    assert np.mean(np.sum(mapped * expected, axis=1)) > 0.95
    assert bridge.held_out_cosine(source, target) > 0.95


def test_unrelated_pairs_map_poorly_and_the_held_out_cosine_says_so() -> None:
    rng = np.random.default_rng(1)
    assert bridge.held_out_cosine(rng.normal(size=(400, 24)), rng.normal(size=(400, 16))) < 0.3


def test_the_weights_round_trip_through_bytes_and_map_a_query() -> None:
    rng = np.random.default_rng(2)
    source, target = rng.normal(size=(200, 8)), rng.normal(size=(200, 4))
    weights = bridge.fit_affine(source, target)
    blob = bridge.weights_bytes(weights)
    assert len(blob) == (8 + 1) * 4 * 4
    assert np.array_equal(bridge.weights_from(blob, 8, 4), weights)
    query = rng.normal(size=8)
    assert np.allclose(
        bridge.mapped_query(blob, 8, 4, query.tolist()), bridge.apply_map(weights, query)[0]
    )
