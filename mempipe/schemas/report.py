"""The audit report's result."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ActionCount(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memory_type: str
    action: str
    count: int


class DaySpend(BaseModel):
    """What the runs spent one day on one kind of request for one memory type ("" where the
    requests served several: an embedding batch), at the configuration's prices."""

    model_config = ConfigDict(extra="forbid")

    day: str
    kind: str
    memory_type: str
    model: str
    via: str
    requests: int
    input_tokens: int
    output_tokens: int
    usd: float | None = Field(description="None: a model the price table does not hold")


class ReportSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    out: str
    files: list[str] = Field(default_factory=list)
    rows: int = 0
    actions: list[ActionCount] = Field(default_factory=list)
    failures: dict[str, int] = Field(default_factory=dict)
    spend: list[DaySpend] = Field(
        default_factory=list, description="what the runs' provider requests spent, by day"
    )
    html: str | None = Field(default=None, description="the page written by --html")
