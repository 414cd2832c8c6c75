"""A bridge between two embedding models: an affine map from one model's query vectors into
the space of the vectors a collection is served by, fitted by least squares on pairs (the
serving model's stored vector of a record, the other model's vector of the same text), so that
the other model's queries can search the stored vectors (Drift-Adapter, Vejendla 2025).

The kind of map and the pairs it needs were chosen by measurement on the dev set (BENCHMARKS.md,
"A bridge while the old model is gone"). Both sides are taken to unit length first: search
ranks by cosine, so only directions matter. A small ridge keeps the fit well posed with fewer
pairs than dimensions. The map is a matrix and an offset fitted on at least ``MIN_PAIRS``
records: it holds no text and no record's vector.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

RIDGE = 0.1
"""The ridge added to the least squares' diagonal (on unit vectors)."""
MIN_PAIRS = 100
"""The fewest pairs a bridge is fitted on: a map of fewer would follow its records too closely."""
POOR_FIT = 0.8
"""A held-out cosine below this is said as a warning: on the dev set a bridge from hashing-384
into MiniLM's vectors fitted at 0.31 and kept a tenth of MiniLM's recall, one from MiniLM into
E5's at 0.91-0.94 kept 0.98-1.0 of E5's (BENCHMARKS.md)."""
HELD_OUT = 10
"""One pair in this many is held out to measure the map before it is refitted on all."""


def unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def fit_affine(source: np.ndarray, target: np.ndarray, ridge: float = RIDGE) -> np.ndarray:
    """``W`` of ``target ≈ [source, 1] · W`` by ridge least squares, both sides unit length:
    ``(source dims + 1) x target dims``, float32."""
    design = np.hstack([unit(source), np.ones((len(source), 1))])
    gram = design.T @ design + ridge * np.eye(design.shape[1])
    return np.linalg.solve(gram, design.T @ unit(target)).astype(np.float32)


def apply_map(weights: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Each vector taken to unit length and mapped; the result at unit length too."""
    source = unit(np.atleast_2d(vectors).astype(np.float32))
    return unit(np.hstack([source, np.ones((len(source), 1), dtype=np.float32)]) @ weights)


def held_out_cosine(source: np.ndarray, target: np.ndarray) -> float:
    """The mean cosine between mapped and stored vectors on the pairs held out of a fit on the
    rest: how well the map carries a vector it has not seen."""
    held = np.arange(len(source)) % HELD_OUT == 0
    weights = fit_affine(source[~held], target[~held])
    mapped = apply_map(weights, source[held])
    return float(np.mean(np.sum(mapped * unit(target[held]), axis=1)))


def weights_bytes(weights: np.ndarray) -> bytes:
    return np.ascontiguousarray(weights, dtype="<f4").tobytes()


def weights_from(blob: bytes, source_dims: int, target_dims: int) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4").reshape(source_dims + 1, target_dims)


def mapped_query(
    blob: bytes, source_dims: int, target_dims: int, vector: Sequence[float]
) -> list[float]:
    weights = weights_from(blob, source_dims, target_dims)
    return [float(x) for x in apply_map(weights, np.asarray(vector))[0]]
