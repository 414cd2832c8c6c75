"""The embedding port and its providers: a local model from a PyPI package (the default), a
deterministic hashing embedder (tests, benchmarks), chosen by model id."""

from __future__ import annotations

from mempipe.adapters.embedding.base import Embedder, Vector
from mempipe.adapters.embedding.factory import embedder_for

__all__ = ["Embedder", "Vector", "embedder_for"]
