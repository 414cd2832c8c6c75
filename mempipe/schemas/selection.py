"""Which snapshots a replay takes up."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict


class SnapshotSelection(BaseModel):
    """Every field given narrows the selection (AND); an omitted one leaves it open."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    org_id: str | None = None
    project_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    snapshot_ids: list[str] | None = None
    since: datetime | None = None
    until: datetime | None = None
