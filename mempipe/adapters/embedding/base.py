"""The embedding port."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

Vector = list[float]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors of a fixed dimension.

    ``embed`` returns one entry per text, in order; ``None`` marks a text this provider cannot
    embed (rejected as too long, refused): the caller stores that memory without a vector and
    the rest of the batch is unaffected. Errors that concern the whole call (network, rate
    limits) are raised as mempipe errors with their transient / terminal marker.
    """

    model_id: str
    dimensions: int

    def embed(self, texts: Sequence[str]) -> list[Vector | None]: ...
