"""Pick an embedder by model id."""

from __future__ import annotations

import re

from mempipe.adapters.embedding.base import Embedder
from mempipe.errors import ConfigError

_HASHING = re.compile(r"^hashing-(\d+)$")


def embedder_for(model_id: str) -> Embedder:
    """``all-MiniLM-L6-v2`` (local model, 384 dimensions) or ``hashing-N`` (N dimensions)."""
    from mempipe.adapters.embedding import local

    if model_id == local.MODEL_ID:
        return local.LocalMiniLM()
    if match := _HASHING.match(model_id):
        from mempipe.adapters.embedding.hashing import HashingEmbedder

        return HashingEmbedder(int(match[1]))
    raise ConfigError(
        f"unknown embedding model {model_id!r}; known: {local.MODEL_ID}, hashing-<dimensions>"
    )
