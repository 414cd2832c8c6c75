"""Pick an embedder by model id."""

from __future__ import annotations

import re

from mempipe.adapters.embedding.base import Embedder
from mempipe.errors import ConfigError

_HASHING = re.compile(r"^hashing-([1-9]\d*)$")
_OPENAI = re.compile(r"^openai:(?P<model>[^:]+)(?::(?P<dimensions>[1-9]\d*))?$")


def embedder_for(model_id: str) -> Embedder:
    """``all-MiniLM-L6-v2`` (local model, 384 dimensions), ``hashing-N`` (N dimensions), or
    ``openai:MODEL[:DIMENSIONS]`` (an OpenAI-compatible endpoint, configured like the LLM)."""
    from mempipe.adapters.embedding import local

    if model_id == local.MODEL_ID:
        local.require_extra()
        return local.LocalMiniLM()
    if match := _HASHING.match(model_id):
        from mempipe.adapters.embedding.hashing import HashingEmbedder

        return HashingEmbedder(int(match[1]))
    if match := _OPENAI.match(model_id):
        from mempipe.adapters.embedding.openai_compat import DEFAULT_DIMENSIONS, OpenAIEmbedder
        from mempipe.settings import load_llm_settings

        dimensions = match["dimensions"] or DEFAULT_DIMENSIONS.get(match["model"])
        if dimensions is None:
            raise ConfigError(f"{model_id}: name the dimension, openai:{match['model']}:N")
        return OpenAIEmbedder(match["model"], int(dimensions), load_llm_settings())
    raise ConfigError(
        f"unknown embedding model {model_id!r}; known: {local.MODEL_ID}, hashing-<dimensions>, "
        "openai:<model>[:<dimensions>]"
    )
