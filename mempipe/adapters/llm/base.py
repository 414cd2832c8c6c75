"""The extractor port: one handler per memory type reads the whole snapshot."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from mempipe.domain.reconcile import Candidate, Verdict
from mempipe.schemas.extraction import Extracted
from mempipe.schemas.memory import MemoryType


class TurnLine(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: str
    content: str
    created_at: datetime | None = None


class SnapshotContent(BaseModel):
    """What a handler reads: the snapshot's turns in order."""

    model_config = ConfigDict(frozen=True)

    snapshot_id: str
    org_id: str
    project_id: str
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str
    turns: list[TurnLine]

    def transcript(self) -> str:
        return "\n".join(f"{t.role}: {t.content}" for t in self.turns)


class ExtractorCapabilities(BaseModel):
    """Optional abilities, declared rather than discovered."""

    model_config = ConfigDict(frozen=True)

    summaries: bool = False
    judge: bool = False


class Extractor(Protocol):
    """Looks for one kind of knowledge in a snapshot. Raises mempipe errors marked environmental
    (retryable) or content-determined (terminal); never returns an empty list for a failure."""

    name: str
    capabilities: ExtractorCapabilities

    def extract(self, snapshot: SnapshotContent, memory_type: MemoryType) -> list[Extracted]: ...

    def summarize(self, snapshot: SnapshotContent) -> str:
        """A short summary of the snapshot (with ``capabilities.summaries``)."""
        ...

    def judge(self, text: str, existing: Candidate) -> Verdict:
        """UPDATE, REINFORCE or ADD for an ambiguous pair (with ``capabilities.judge``)."""
        ...
