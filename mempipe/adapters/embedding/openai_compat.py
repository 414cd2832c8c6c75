"""Embeddings from any OpenAI-compatible endpoint, through the ``openai`` client: batched, with
the ``dimensions`` parameter, and the same failure classes as extraction (the client's own
retries are off; the retry policy of the caller decides). Every answer is validated where it
enters: a short list, a vector of another dimension or with NaN, or a body that is not the API's
JSON is the provider's failure of that batch (``invalid_response``), never a text's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from mempipe.adapters.embedding.base import Vector
from mempipe.adapters.llm.answers import embedding_vectors, invalid_response, validated
from mempipe.adapters.llm.guard import ProviderGuard
from mempipe.adapters.llm.openai_compat import openai_client
from mempipe.adapters.llm.ratelimit import limiter
from mempipe.adapters.llm.tokens import embedding_counter
from mempipe.schemas.embedding import ModelOptions, SideOptions
from mempipe.schemas.errors import describe
from mempipe.schemas.provider import EmbeddingList
from mempipe.schemas.replay import LLMSettings

if TYPE_CHECKING:
    import openai

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
        options: ModelOptions | None = None,
    ) -> None:
        self.model = model
        self.dimensions = dimensions
        self.model_id = f"openai:{model}:{dimensions}"
        self.options = options or ModelOptions()
        self.symmetric = self.options.symmetric
        self._send_dimensions = bool(
            DEFAULT_DIMENSIONS.get(model) != dimensions and self.options.dimensions_parameter
        )
        self._client = client or openai_client(settings, self.model_id)
        self._guard = ProviderGuard(
            str(self._client.base_url),
            model,
            limiter(settings.model_copy(update={"model": model}), str(self._client.base_url)),
        )
        self._counter = embedding_counter(self.model_id) if settings.tokens_per_minute else None

    endpoint = "/v1/embeddings"

    def request_body(self, texts: Sequence[str], *, query: bool = False) -> dict[str, Any]:
        """One embeddings request, the same live and in a batch file: the side's prefix before
        each text, the model's fields and the side's, the dimension under the model's name
        for it. Fields go in the body, where an OpenAI-shaped endpoint (Voyage's, a local
        server's) reads its own parameters."""
        side = self._side(query)
        body: dict[str, Any] = {"model": self.model, "input": [side.prefix + t for t in texts]}
        body["encoding_format"] = "float"
        if self._send_dimensions:
            body[str(self.options.dimensions_parameter)] = self.dimensions
        body.update(self.options.fields)
        body.update(side.fields)
        return body

    def _side(self, query: bool) -> SideOptions:
        return self.options.query if query else self.options.document

    def vectors_from(self, body: object, inputs: int) -> list[Vector]:
        """The vectors of an answer's body (a batch line's), validated as a live answer is."""
        try:
            answer = EmbeddingList.model_validate(body)
        except ValidationError as exc:
            raise invalid_response(
                f"{self.model_id}: the answer is not of the API's shape: {describe(exc)}"
            ) from exc
        self._guard.spent("embedding", answer.usage, via="batch")
        return embedding_vectors(answer, inputs, self.dimensions, self.model_id)

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        return self._embed(texts, query=False)

    def embed_query(self, texts: Sequence[str]) -> list[Vector | None]:
        return self._embed(texts, query=True)

    def _embed(self, texts: Sequence[str], *, query: bool) -> list[Vector | None]:
        vectors: list[Vector | None] = []
        for start in range(0, len(texts), BATCH):
            body = self.request_body(texts[start : start + BATCH], query=query)
            tokens = sum(self._counter.count(body["input"])) if self._counter is not None else 0
            vectors.extend(self._guard.send(lambda body=body: self._send(body), tokens))
        return vectors

    def _send(self, body: dict[str, Any]) -> list[Vector]:
        """The client's own parameters as such; the model's other fields in ``extra_body``."""
        own = {"model", "input", "encoding_format", "dimensions"}
        raw = self._client.embeddings.with_raw_response.create(
            **{k: v for k, v in body.items() if k in own},
            extra_body={k: v for k, v in body.items() if k not in own} or None,
        )
        answer = validated(raw, EmbeddingList, self.model_id)
        self._guard.spent("embedding", answer.usage)
        return embedding_vectors(answer, len(body["input"]), self.dimensions, self.model_id)
