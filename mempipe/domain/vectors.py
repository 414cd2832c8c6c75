"""Which vectors may be stored and searched: an all-zero vector has no direction (cosine
distance to it is undefined, NULL in sqlite-vec) and a non-finite one poisons every distance."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def vector_problem(vector: Sequence[float]) -> str | None:
    """Why ``vector`` must not be stored, or None when it is usable."""
    values = np.asarray(vector, dtype=np.float64)
    if values.size == 0:
        return "empty"
    if not np.isfinite(values).all():
        return "not finite (NaN or infinity)"
    if not values.any():
        return "all zeros"
    return None


def cosine_scores(query: Sequence[float], vectors: Sequence[Sequence[float]]) -> np.ndarray:
    """The cosine of ``query`` with each of ``vectors`` at once (a vector with no direction
    scores -1: never nearer than a real one)."""
    rows = np.asarray(vectors, dtype=np.float64)
    x = np.asarray(query, dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1) * float(np.linalg.norm(x))
    scores = np.full(len(rows), -1.0)
    np.divide(rows @ x, norms, out=scores, where=norms > 0)
    return scores


def cosine_similarity(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Cosine of two vectors; None when either has no direction."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    norms = float(np.linalg.norm(x) * np.linalg.norm(y))
    return None if norms == 0 or x.shape != y.shape else float(x @ y / norms)
