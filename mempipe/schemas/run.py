"""A flow run as the store records it: parameters, counts, checkpoints and outcome."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class RunStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


class RunRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    flow: str
    parameters: dict[str, Any] = Field(default_factory=dict)
    status: RunStatus = RunStatus.RUNNING
    counts: dict[str, int] = Field(default_factory=dict)
    checkpoints: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    started_at: datetime
    finished_at: datetime | None = None
