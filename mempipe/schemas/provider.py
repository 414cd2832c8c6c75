"""What an OpenAI-compatible endpoint must answer, as pydantic models: a 200 is taken only once
its body validates against them. Only the fields mempipe reads are declared; others are ignored,
so a compatible server that adds fields still works."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ChatMessage(_Answer):
    content: str | None = None
    refusal: str | None = None


class ChatChoice(_Answer):
    message: ChatMessage
    finish_reason: str | None = None


class ChatCompletion(_Answer):
    choices: list[ChatChoice] = Field(min_length=1)


class EmbeddingItem(_Answer):
    index: int = Field(ge=0)
    embedding: list[float] = Field(min_length=1)


class EmbeddingList(_Answer):
    data: list[EmbeddingItem]
