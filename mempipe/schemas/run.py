"""A flow run as the store records it: parameters, counts, checkpoints and outcome."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mempipe.credentials import NoCredentials


class RunStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


class RunRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    flow: str
    parameters: dict[str, Any] = Field(default_factory=dict)
    status: RunStatus = RunStatus.RUNNING
    counts: dict[str, int] = Field(default_factory=dict)
    checkpoints: dict[str, Any] = Field(default_factory=dict)
    error: NoCredentials | None = None
    started_at: datetime
    finished_at: datetime | None = None
    host: str | None = Field(default=None, description="the machine the run's process is on")
    pid: int | None = Field(default=None, description="the run's process on that machine")
    machine: str | None = Field(
        default=None, description="boot and pid-namespace id: whose pids ``pid`` is one of"
    )
    heartbeat_at: datetime | None = Field(
        default=None, description="last sign of life; a live run renews it"
    )


class Lease(BaseModel):
    """A named lock held by a run (an owner's replay work, a store's re-embed) until ``until``;
    the holder renews it with each heartbeat."""

    model_config = ConfigDict(extra="forbid")

    name: str
    run_id: str
    until: datetime
    acquired_at: datetime


class FileKind(StrEnum):
    AUDIT = "audit"
    REJECTS = "rejects"
    BUNDLE = "bundle"
    REPORT = "report"


class WrittenFile(BaseModel):
    """A file or folder mempipe wrote that holds users' text, recorded in the store so that an
    erase can reach it wherever it went."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="absolute; a folder for an audit or a bundle")
    kind: FileKind
    run_id: str | None = None
    user_id: str | None = Field(
        default=None, description="the run's default user: a rejects file's lines are theirs"
    )
    written_at: datetime
