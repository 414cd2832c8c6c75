"""Embeddings from any OpenAI-compatible endpoint, through the ``openai`` client: batched, with
the ``dimensions`` parameter, and the same failure classes as extraction (the client's own
retries are off; the retry policy of the caller decides)."""

from __future__ import annotations

from collections.abc import Sequence

import openai

from mempipe.adapters.embedding.base import Vector
from mempipe.adapters.llm.openai_compat import openai_client, translate
from mempipe.adapters.llm.ratelimit import limiter
from mempipe.domain.failures import ContentError, FailureKind
from mempipe.schemas.replay import LLMSettings

BATCH = 256
DEFAULT_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class OpenAIEmbedder:
    def __init__(
        self,
        model: str,
        dimensions: int,
        settings: LLMSettings,
        client: openai.OpenAI | None = None,
    ) -> None:
        self.model = model
        self.dimensions = dimensions
        self.model_id = f"openai:{model}:{dimensions}"
        self._send_dimensions = DEFAULT_DIMENSIONS.get(model) != dimensions
        self._client = client or openai_client(settings)
        self._limiter = limiter(settings, str(self._client.base_url))

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        vectors: list[Vector | None] = []
        for start in range(0, len(texts), BATCH):
            chunk = list(texts[start : start + BATCH])
            options = {"dimensions": self.dimensions} if self._send_dimensions else {}
            if self._limiter is not None:
                self._limiter.acquire()
            try:
                response = self._client.embeddings.create(model=self.model, input=chunk, **options)
            except openai.APIError as exc:
                raise translate(exc) from exc
            ordered = sorted(response.data, key=lambda item: item.index)
            for item in ordered:
                if len(item.embedding) != self.dimensions:
                    raise ContentError(
                        FailureKind.INVALID_OUTPUT,
                        f"{self.model} returned {len(item.embedding)} dimensions, "
                        f"expected {self.dimensions}",
                    )
            vectors.extend(list(item.embedding) for item in ordered)
        return vectors
