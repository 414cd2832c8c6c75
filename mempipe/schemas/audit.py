"""One audit row per reconciliation outcome, and per record a retention policy forgot; the
Parquet audit's schema derives from it."""

from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from mempipe.schemas.identity import IdStr


class AuditTime(StrEnum):
    """Which time an audit selection is on."""

    APPLIED = "applied"
    OBSERVED = "observed"


class AuditSelection(BaseModel):
    """Which audit rows to read: a run's, and those of the days ``since`` .. ``until`` (ISO
    dates, both included) of the time ``by`` names: applied (``day``) or observed
    (``observed_at``, the snapshots' times). Nothing given: every row."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str | None = None
    since: str | None = None
    until: str | None = None
    by: AuditTime = AuditTime.APPLIED


EVERY_ROW = AuditSelection()


class ReconcileAction(StrEnum):
    ADD = "ADD"
    UPDATE = "UPDATE"
    REINFORCE = "REINFORCE"
    FORGET = "FORGET"
    """Never a reconciliation's: ``mempipe forget`` removed the record (its row holds no
    text)."""


class AuditRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    at: datetime
    day: date
    org_id: IdStr
    project_id: IdStr
    user_id: str | None = None
    agent_id: str | None = None
    memory_type: str
    action: ReconcileAction
    memory_id: str
    version: int
    superseded_id: str | None = None
    similarity: float | None = None
    snapshot_id: str | None = None
    extractor: str | None = None
    prompt_version: str | None = Field(
        default=None,
        description="the prompt the extraction ran with, for an extractor with prompts",
    )
    embedding_model_id: str | None = None
    text: str
    as_history: bool = Field(
        default=False,
        description="the snapshot is older than the current fact: kept as a superseded version",
    )
    observed_at: datetime | None = Field(
        default=None,
        description="when the evidence happened (the snapshot's time; an imported memory's own "
        "time), where ``at`` is when the change was applied",
    )
    rule: str | None = Field(
        default=None,
        description="for FORGET: the retention rule that applied (turns.max_age, "
        "semantic.max_per_user, keep_versions, ...)",
    )
