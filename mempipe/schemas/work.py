"""The replay work queue's unit: one extraction to run."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from mempipe.schemas.selection import SnapshotSelection


class ExtractionVersion(BaseModel):
    """What an extraction ran with: the extractor (whose name carries its model, or its rules'
    version) and, for an extractor with prompts, the prompt's version."""

    model_config = ConfigDict(frozen=True)

    extractor: str
    prompt_version: str | None = None

    def stale(self, status: str, extractor: str | None, prompt_version: str | None) -> bool:
        """A done extraction that ran with another extractor or prompt than this one."""
        return status == "done" and (extractor, prompt_version) != (
            self.extractor,
            self.prompt_version,
        )


Stale = dict[str, ExtractionVersion]
"""``replay --stale``: per handler, the extraction configured now; a done extraction that ran
with another is work again."""


class WorkQuery(BaseModel):
    """What the work queue is asked for: (snapshot, handler) pairs of the selection that are
    pending or retryable; every pair with ``force``; with ``stale``, also the done ones that ran
    with another extraction than the one given."""

    model_config = ConfigDict(frozen=True)

    handlers: tuple[str, ...]
    selection: SnapshotSelection = Field(default_factory=SnapshotSelection)
    force: bool = False
    stale: Stale | None = None


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
