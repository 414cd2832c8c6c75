"""A record an archive held that could not become a turn, with where it was and why."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Reject(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    line: int | None = None
    index: int | None = None
    message_index: int | None = None
    reason: str
    raw: str
    offset: int | None = Field(default=None, description="byte offset reached in the file")
    whole_file: bool = Field(
        default=False, description="the rest of the file could not be read: the file failed"
    )
    identity_conflict: bool = Field(
        default=False, description="it carries an id of its own that differs from one named"
    )
