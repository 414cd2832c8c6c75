"""What an extraction handler reads of a snapshot: its turns, in order, with their owner."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict


class TurnLine(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: str
    content: str
    created_at: datetime | None = None


class SnapshotContent(BaseModel):
    """What a handler reads: the snapshot's turns in order."""

    model_config = ConfigDict(frozen=True)

    snapshot_id: str
    org_id: str
    project_id: str
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str
    turns: list[TurnLine]

    def transcript(self) -> str:
        return "\n".join(f"{t.role}: {t.content}" for t in self.turns)
