"""The extractor port: one handler per memory type reads the whole snapshot."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from mempipe.domain.reconcile import Candidate, Verdict
from mempipe.schemas.extraction import Extracted
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.transcript import SnapshotContent


class ExtractorCapabilities(BaseModel):
    """Optional abilities, declared rather than discovered."""

    model_config = ConfigDict(frozen=True)

    summaries: bool = False
    judge: bool = False
    prompts: bool = False
    """Extracts with the configured prompts, whose versions every extraction records."""


@runtime_checkable
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
