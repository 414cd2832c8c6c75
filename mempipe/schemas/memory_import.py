"""Long-term memories brought in from other systems: what a parser makes of one source record,
and what an import did."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from mempipe.credentials import NoCredentials
from mempipe.schemas.extraction import Extracted
from mempipe.schemas.identity import IdentityDefaults, IdStr
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.summaries import UserCount
from mempipe.schemas.turn import SourceLocation


class MemoryFormat(StrEnum):
    """The built-in memory formats (a plug-in's are registered by name: see
    :mod:`mempipe.archives.registry`)."""

    MEM0 = "mem0"
    LANGGRAPH = "langgraph"
    MEMORIES = "memories"


class ImportedMemory(BaseModel):
    """One memory of another system, in mempipe's terms: its identity, its type and the
    fields extraction would have given it, its times, and where it was read."""

    model_config = ConfigDict(extra="forbid")

    source_system: str
    source_id: str | None = Field(default=None, description="the id the other system gave it")
    memory_type: MemoryType
    org_id: IdStr
    project_id: IdStr
    user_id: IdStr | None = None
    agent_id: IdStr | None = None
    session_id: IdStr | None = None
    memory: Extracted
    created_at: datetime | None = None
    updated_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: SourceLocation


class MemoryReading(BaseModel):
    """How an import reads another system's memory files: the same for every file of a run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: str
    defaults: IdentityDefaults
    memory_type: MemoryType | None = None
    verbatim: bool = False
    rejects_file: Path
    batch_size: int = Field(default=256, ge=1)


class MemoryImportRequest(MemoryReading):
    """One file of another system's memories to bring in."""

    path: Path


class MemoryImportSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    format: str
    records_read: int = 0
    added: int = 0
    updated: int = 0
    reinforced: int = 0
    duplicates_skipped: int = 0
    skipped_erased: int = Field(
        default=0, description="memories of an owner erased while the run went on: not written"
    )
    rejected: int = 0
    rejects_path: str | None = None
    without_vector: int = 0
    provider_failed: int = Field(
        default=0, description="of those without a vector, the ones the provider failed (retryable)"
    )
    provider_error: NoCredentials | None = Field(
        default=None, description="why the provider failed, where it did"
    )
    failed_files: list[str] = Field(default_factory=list)
    users: list[UserCount] = Field(
        default_factory=list,
        description="the users the memories read were for (written, already held, or not "
        "written: an erased user), with how many memories each",
    )
    unread: dict[str, str] = Field(
        default_factory=dict, description="why each failed file could not be read to the end"
    )
    audit_files: list[str] = Field(
        default_factory=list, description="the Parquet audit files of the import's run"
    )
    seconds: float = 0.0

    COUNTED: ClassVar[tuple[str, ...]] = (
        "records_read",
        "added",
        "updated",
        "reinforced",
        "duplicates_skipped",
        "skipped_erased",
        "rejected",
        "without_vector",
        "provider_failed",
    )
    """The counts summed over an import's files and recorded with its run."""

    @classmethod
    def of_files(
        cls, run_id: str, format: str, files: list[MemoryImportSummary]
    ) -> MemoryImportSummary:
        """One import's summary, summed over its files."""
        summary = cls(run_id=run_id, format=format)
        for part in files:
            for count in cls.COUNTED:
                setattr(summary, count, getattr(summary, count) + getattr(part, count))
            summary.failed_files += part.failed_files
            summary.users = UserCount.summed([summary.users, part.users])
            summary.unread |= part.unread
            summary.provider_error = summary.provider_error or part.provider_error
        return summary

    def run_counts(self) -> dict[str, int]:
        return {count: getattr(self, count) for count in self.COUNTED}
