"""Provider answers validated where they enter: a 200 whose body is not JSON, or not of the API's
shape, is a classified failure of that call (``invalid_response``, retried under the policy like
any provider fault), never an exception from deep inside a parser that aborts the run."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from mempipe.domain.failures import EnvironmentalError, FailureKind
from mempipe.domain.vectors import vector_problem
from mempipe.schemas.errors import describe
from mempipe.schemas.provider import EmbeddingList

M = TypeVar("M", bound=BaseModel)


def invalid_response(message: str) -> EnvironmentalError:
    return EnvironmentalError(FailureKind.INVALID_RESPONSE, message)


def validated(raw: Any, model: type[M], what: str) -> M:
    """The body of ``raw`` (an ``openai`` raw response) as ``model``. The body itself is never
    quoted in the error: it may hold the user's text."""
    content_type = raw.headers.get("content-type", "")
    if "json" not in content_type.lower():
        raise invalid_response(
            f"{what}: the endpoint answered {content_type or 'without a content type'} "
            f"({len(raw.content)} bytes), not JSON"
        )
    try:
        return model.model_validate_json(raw.content)
    except ValidationError as exc:
        raise invalid_response(
            f"{what}: the answer is not of the API's shape: {describe(exc)}"
        ) from exc


def embedding_vectors(
    answer: EmbeddingList, inputs: int, dimensions: int, what: str
) -> list[list[float]]:
    """One vector per input, in input order, each of ``dimensions`` finite values with a
    direction; anything else is the provider's fault, not the texts'."""
    indices = sorted(item.index for item in answer.data)
    if indices != list(range(inputs)):
        shown = ", ".join(map(str, indices[:5])) + (", ..." if len(indices) > 5 else "")
        raise invalid_response(
            f"{what}: {len(indices)} vector(s) (indices {shown or 'none'}) for {inputs} input(s)"
        )
    ordered = sorted(answer.data, key=lambda item: item.index)
    for item in ordered:
        if len(item.embedding) != dimensions:
            raise invalid_response(
                f"{what}: a vector of {len(item.embedding)} dimensions, expected {dimensions}"
            )
        if problem := vector_problem(item.embedding):
            raise invalid_response(f"{what}: a vector that is {problem}")
    return [item.embedding for item in ordered]
