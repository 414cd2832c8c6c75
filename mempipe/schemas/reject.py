"""A record an archive held that could not become a turn, with where it was and why."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Reject(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    line: int | None = None
    index: int | None = None
    message_index: int | None = None
    reason: str
    raw: str
