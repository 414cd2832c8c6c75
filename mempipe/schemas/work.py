"""The replay work queue's unit: one extraction to run."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class WorkItem(BaseModel):
    """One extraction to run: a snapshot and one handler, with the owner it is reconciled for."""

    model_config = ConfigDict(frozen=True)

    snapshot_id: str
    handler: str
    attempts: int = 0
    org_id: str
    project_id: str
    user_id: str | None = None

    @property
    def partition(self) -> tuple[str, str, str]:
        """Work of one owner runs in time order, one item after another; owners in parallel."""
        return (self.org_id, self.project_id, self.user_id or "")
