"""Short-term memory: one record per conversation turn."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mempipe.schemas.identity import IdStr
from mempipe.schemas.text import SoundText


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"


class SourceLocation(BaseModel):
    """Where a record was read from, so a reject or a search hit can be traced to its archive."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    line: int | None = Field(default=None, ge=1, description="1-based line, for line formats")
    index: int | None = Field(
        default=None, ge=0, description="0-based record index, for array and table formats"
    )
    message_index: int | None = Field(
        default=None, ge=0, description="0-based message position inside a conversation record"
    )


class Turn(BaseModel):
    """A conversation turn as stored. Unique on :data:`TURN_KEY`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    org_id: IdStr
    project_id: IdStr
    user_id: IdStr | None = None
    agent_id: IdStr | None = None
    session_id: IdStr
    turn_seq: int = Field(ge=0, description="position in the session, from 0")
    role: Role
    content: SoundText
    created_at: datetime | None = Field(
        default=None, description="the original time; null when the source has none"
    )
    message_id: str | None = Field(default=None, description="the id the source gave the message")
    name: SoundText | None = None
    model: str | None = Field(default=None, description="model that produced the message")
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="the caller's own keys; empty means no slot"
    )
    snapshot_id: str | None = None
    source: SourceLocation

    @field_validator("created_at")
    @classmethod
    def _as_utc(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value if value.tzinfo is UTC else value.astimezone(UTC)


TURN_FIELDS: tuple[str, ...] = tuple(
    f for f in Turn.model_fields if f not in ("snapshot_id", "source")
)
"""A turn's own fields, in model order: the canonical archive format's fields, and the store's
turn columns before where the turn was read from."""

TURN_KEY: tuple[str, ...] = ("org_id", "project_id", "user_id", "session_id", "turn_seq")
"""A turn's identity: two users may reuse a session id, so the user is part of it."""
