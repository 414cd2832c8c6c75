"""Embed texts for storage: retried under the policy, and a refused batch split so that one
text the provider cannot embed costs only its own vector."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mempipe.adapters.embedding import Embedder, Vector
from mempipe.domain.failures import RetryPolicy
from mempipe.errors import MempipeError


def embed_texts(
    embedder: Embedder,
    texts: Sequence[str],
    retry: RetryPolicy,
    sleep: Callable[[float], Any],
) -> tuple[list[Vector | None], list[tuple[int, MempipeError]]]:
    """Vectors (None where missing) and the errors that left them missing, by position. An
    environmental failure that outlasts the retries leaves the whole batch without vectors."""
    if not texts:
        return [], []
    try:
        return list(retry.run(lambda: embedder.embed(list(texts)), sleep=sleep)), []
    except MempipeError as batch_error:
        if batch_error.retryable:
            return [None] * len(texts), [(i, batch_error) for i in range(len(texts))]
    vectors: list[Vector | None] = []
    errors: list[tuple[int, MempipeError]] = []
    for position, text in enumerate(texts):
        try:
            vectors.extend(embedder.embed([text]))
        except MempipeError as item_error:
            vectors.append(None)
            errors.append((position, item_error))
    return vectors, errors
