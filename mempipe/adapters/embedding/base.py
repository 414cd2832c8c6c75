"""The embedding port."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

Vector = list[float]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors of a fixed dimension.

    ``embed`` embeds what is stored (documents: turns, memories); ``embed_query`` what is
    searched with. Models trained with a query side and a document side (E5, BGE, Nomic; Voyage,
    Cohere and NIM's ``input_type``) lose recall when a query is embedded as a document; a
    symmetric model (MiniLM, OpenAI's) answers both the same. Both return one entry per text, in
    order; ``None`` marks a text this provider cannot embed (rejected as too long, refused): the
    caller stores that memory without a vector and the rest of the batch is unaffected. Errors
    that concern the whole call (network, rate limits) are raised as mempipe errors with their
    transient / terminal marker.
    """

    model_id: str
    dimensions: int
    symmetric: bool
    """Whether ``embed_query`` answers as ``embed`` does."""

    def embed(self, texts: Sequence[str]) -> list[Vector | None]: ...

    def embed_query(self, texts: Sequence[str]) -> list[Vector | None]: ...


class Symmetric:
    """A model with one side: its queries are embedded as its documents are."""

    symmetric = True

    def embed_query(self, texts: Sequence[str]) -> list[Vector | None]:
        return self.embed(texts)  # type: ignore[attr-defined, no-any-return]


class SymmetricPlugin(Symmetric):
    """A plug-in's embedder written before the port had two sides (``embed`` only)."""

    def __init__(self, inner: object) -> None:
        self._inner = inner
        self.model_id: str = inner.model_id  # type: ignore[attr-defined]
        self.dimensions: int = inner.dimensions  # type: ignore[attr-defined]

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        return self._inner.embed(texts)  # type: ignore[attr-defined, no-any-return]
