"""The embedding port and its providers: a local model from a PyPI package (the default), a
deterministic hashing embedder (tests, benchmarks), an OpenAI-compatible endpoint, and any a
plug-in registers; chosen by model id (:mod:`mempipe.adapters.embedding.registry`)."""

from __future__ import annotations

from mempipe.adapters.embedding.base import Embedder, Vector
from mempipe.adapters.embedding.registry import embedder_for

__all__ = ["Embedder", "Vector", "embedder_for"]
