"""Session snapshots: contiguous runs of a session's turns, the unit extraction reads."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from mempipe.credentials import NoCredentials
from mempipe.schemas.identity import IdStr


class CutReason(StrEnum):
    MAX_MESSAGES = "max_messages"
    IDLE = "idle"
    END_OF_ARCHIVE = "end_of_archive"
    DISCONTINUITY = "discontinuity"


class ExtractionStatus(StrEnum):
    PENDING = "pending"
    DONE = "done"
    FAILED_RETRYABLE = "failed_retryable"
    FAILED_CONTENT = "failed_content"


class ExtractionState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    handler: str
    status: ExtractionStatus = ExtractionStatus.PENDING
    attempts: int = Field(default=0, ge=0)
    last_error: NoCredentials | None = None
    extractor: str | None = Field(
        default=None, description="the extractor (with its model) of the last completed run"
    )
    prompt_version: str | None = Field(
        default=None, description="the prompt it ran with (an extractor with prompts)"
    )


class Snapshot(BaseModel):
    model_config = ConfigDict(extra="forbid")

    snapshot_id: str
    org_id: IdStr
    project_id: IdStr
    user_id: IdStr | None = None
    agent_id: IdStr | None = None
    session_id: IdStr
    first_turn_seq: int = Field(ge=0)
    last_turn_seq: int = Field(ge=0)
    turn_count: int = Field(ge=1)
    started_at: datetime | None = None
    ended_at: datetime | None = None
    cut_reason: CutReason
    summary: str
    extraction: list[ExtractionState] = Field(default_factory=list)
    run_id: str | None = None
