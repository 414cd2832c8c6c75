"""Steps that failed for good, kept so that operators can see and retry them."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from mempipe.credentials import NoCredentials


class FailureClass(StrEnum):
    ENVIRONMENTAL = "environmental"
    CONTENT = "content"


class Failure(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    step: str
    failure_class: FailureClass
    error_type: str
    error: NoCredentials
    attempts: int = Field(ge=1)
    org_id: str | None = None
    project_id: str | None = None
    snapshot_id: str | None = None
    handler: str | None = None
    memory_id: str | None = None
    at: datetime
