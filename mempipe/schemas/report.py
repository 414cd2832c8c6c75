"""The audit report's result."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ActionCount(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memory_type: str
    action: str
    count: int


class ReportSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    out: str
    files: list[str] = Field(default_factory=list)
    rows: int = 0
    actions: list[ActionCount] = Field(default_factory=list)
    failures: dict[str, int] = Field(default_factory=dict)
    html: str | None = Field(default=None, description="the page written by --html")
