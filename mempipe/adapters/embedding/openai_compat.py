"""Embeddings from any OpenAI-compatible endpoint, through the ``openai`` client: batched, with
the ``dimensions`` parameter, and the same failure classes as extraction (the client's own
retries are off; the retry policy of the caller decides). Every answer is validated where it
enters: a short list, a vector of another dimension or with NaN, or a body that is not the API's
JSON is the provider's failure of that batch (``invalid_response``), never a text's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from mempipe.adapters.embedding.base import Symmetric, Vector
from mempipe.adapters.llm.answers import embedding_vectors, invalid_response, validated
from mempipe.adapters.llm.guard import ProviderGuard
from mempipe.adapters.llm.openai_compat import openai_client
from mempipe.adapters.llm.ratelimit import limiter
from mempipe.adapters.llm.tokens import embedding_counter

if TYPE_CHECKING:
    import openai
from mempipe.schemas.errors import describe
from mempipe.schemas.provider import EmbeddingList
from mempipe.schemas.replay import LLMSettings

BATCH = 256
DEFAULT_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class OpenAIEmbedder(Symmetric):
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
        self._guard = ProviderGuard(
            str(self._client.base_url),
            model,
            limiter(settings.model_copy(update={"model": model}), str(self._client.base_url)),
        )
        self._counter = embedding_counter(self.model_id) if settings.tokens_per_minute else None

    endpoint = "/v1/embeddings"

    def request_body(self, texts: Sequence[str]) -> dict[str, Any]:
        """One embeddings request, the same live and in a batch file."""
        body: dict[str, Any] = {"model": self.model, "input": list(texts)}
        body["encoding_format"] = "float"
        if self._send_dimensions:
            body["dimensions"] = self.dimensions
        return body

    def vectors_from(self, body: object, inputs: int) -> list[Vector]:
        """The vectors of an answer's body (a batch line's), validated as a live answer is."""
        try:
            answer = EmbeddingList.model_validate(body)
        except ValidationError as exc:
            raise invalid_response(
                f"{self.model_id}: the answer is not of the API's shape: {describe(exc)}"
            ) from exc
        return embedding_vectors(answer, inputs, self.dimensions, self.model_id)

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        vectors: list[Vector | None] = []
        for start in range(0, len(texts), BATCH):
            chunk = list(texts[start : start + BATCH])
            tokens = sum(self._counter.count(chunk)) if self._counter is not None else 0
            vectors.extend(self._guard.send(lambda chunk=chunk: self._send(chunk), tokens))
        return vectors

    def _send(self, chunk: list[str]) -> list[Vector]:
        raw = self._client.embeddings.with_raw_response.create(**self.request_body(chunk))
        answer = validated(raw, EmbeddingList, self.model_id)
        return embedding_vectors(answer, len(chunk), self.dimensions, self.model_id)
