"""A deterministic feature-hashing embedder: no model, no network, same vector every run.

Words and word pairs are hashed into ``dimensions`` signed buckets and the result is
L2-normalised, so texts sharing words are close. It is the fast embedder for tests and
benchmarks, not a semantic model.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence

import numpy as np

from mempipe.adapters.embedding.base import Symmetric, Vector

_TOKEN = re.compile(r"[a-z0-9]+")


class HashingEmbedder(Symmetric):
    def __init__(self, dimensions: int = 256) -> None:
        self.dimensions = dimensions
        self.model_id = f"hashing-{dimensions}"

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        matrix = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            tokens = _TOKEN.findall(text.lower())
            for feature in (
                *tokens,
                *(f"{a} {b}" for a, b in itertools.pairwise(tokens)),
            ):
                digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest())
                matrix[row, digest % self.dimensions] += 1.0 if digest >> 63 else -1.0
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return (matrix / norms).tolist()
