"""Embed texts for storage: retried under the policy, and a refused batch split so that one
text the provider cannot embed costs only its own vector."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mempipe.adapters.embedding import Embedder, Vector, embedder_for
from mempipe.adapters.embedding.registry import OPENAI_MODEL, remember_recorded
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.domain.failures import ContentError, FailureKind, RetryPolicy
from mempipe.domain.vectors import vector_problem
from mempipe.errors import MempipeError

PROBE_TEXT = "mempipe probe"
"""What a model is asked to embed to show it answers (a re-embed's probe, a plan's line)."""


def store_embedder(uow: UnitOfWork, model_id: str) -> Embedder:
    """The embedder of ``model_id`` asked as this store's registry recorded it (a two-sided
    provider model's sides): what its stored vectors were made with."""
    take_recorded_options(uow, model_id)
    return embedder_for(model_id)


def take_recorded_options(uow: UnitOfWork, model_id: str) -> None:
    """How this store's registry says ``model_id`` is asked, taken for the embedders this
    process builds (before the configuration's: the stored vectors were made so). Only a
    provider model is asked with options: for any other the registry is not read (a search
    pays for no extra read)."""
    if OPENAI_MODEL.match(model_id):
        remember_recorded(uow.models.registry())


def embed_texts(
    embedder: Embedder, texts: Sequence[str], retry: RetryPolicy, sleep: Callable[[float], Any]
) -> tuple[list[Vector | None], list[tuple[int, MempipeError]]]:
    """Vectors (None where missing) and the errors that left them missing, by position. An
    environmental failure that outlasts the retries leaves the whole batch without vectors."""
    if not texts:
        return [], []
    try:
        return checked(embedder, retry.run(lambda: embedder.embed(list(texts)), sleep=sleep))
    except MempipeError as batch_error:
        if batch_error.retryable:
            return [None] * len(texts), [(i, batch_error) for i in range(len(texts))]
    vectors: list[Vector | None] = []
    errors: list[tuple[int, MempipeError]] = []
    for position, text in enumerate(texts):
        try:
            (vector,) = embedder.embed([text])
        except MempipeError as item_error:
            vectors.append(None)
            errors.append((position, item_error))
            continue
        found, problems = checked(embedder, [vector])
        vectors.extend(found)
        errors.extend((position, problem) for _, problem in problems)
    return vectors, errors


def checked(
    embedder: Embedder, vectors: Sequence[Vector | None]
) -> tuple[list[Vector | None], list[tuple[int, MempipeError]]]:
    """Vectors checked at the door: an all-zero or non-finite one is not stored (its record is
    kept without a vector, found by text and hybrid) and counts as a content failure."""
    kept: list[Vector | None] = []
    errors: list[tuple[int, MempipeError]] = []
    for position, vector in enumerate(vectors):
        problem = None if vector is None else vector_problem(vector)
        if problem is not None:
            errors.append(
                (
                    position,
                    ContentError(
                        FailureKind.INVALID_OUTPUT,
                        f"{embedder.model_id} returned a vector that is {problem}",
                    ),
                )
            )
            vector = None
        kept.append(vector)
    return kept, errors
