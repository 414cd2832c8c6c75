"""What an OpenAI-compatible endpoint must answer, as pydantic models: a 200 is taken only once
its body validates against them. Only the fields mempipe reads are declared; others are ignored,
so a compatible server that adds fields still works."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Usage(_Answer):
    """What the provider counted: ``prompt_tokens`` (chat and embeddings), ``completion_tokens``
    (chat)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0


class ChatMessage(_Answer):
    content: str | None = None
    refusal: str | None = None


class ChatChoice(_Answer):
    message: ChatMessage
    finish_reason: str | None = None


class ChatCompletion(_Answer):
    choices: list[ChatChoice] = Field(min_length=1)
    usage: Usage | None = None


class EmbeddingItem(_Answer):
    index: int = Field(ge=0)
    embedding: list[float] = Field(min_length=1)


class EmbeddingList(_Answer):
    data: list[EmbeddingItem]
    usage: Usage | None = None


class BatchRequestCounts(_Answer):
    total: int = 0
    completed: int = 0
    failed: int = 0


class BatchInfo(_Answer):
    """A batch as the Batch API describes it."""

    id: str
    status: str
    input_file_id: str
    output_file_id: str | None = None
    error_file_id: str | None = None
    request_counts: BatchRequestCounts | None = None


BATCH_RUNNING = ("validating", "in_progress", "finalizing", "cancelling")
"""Batch API states after which the batch still changes."""


class BatchResponse(_Answer):
    status_code: int
    body: dict[str, object] = Field(default_factory=dict)


class BatchLineError(_Answer):
    code: str | None = None
    message: str | None = None


class BatchOutputLine(_Answer):
    """One line of a batch's output or error file."""

    custom_id: str
    response: BatchResponse | None = None
    error: BatchLineError | None = None
