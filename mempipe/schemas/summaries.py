"""Typed summaries that tasks return, flows add up and the CLI prints."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from mempipe.schemas.reject import Reject


class MigrationReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: str
    applied: list[str] = Field(default_factory=list, description="applied by this call")
    already_applied: list[str] = Field(default_factory=list)
    pending: list[str] = Field(default_factory=list, description="not applied (read-only check)")


class TurnWriteResult(BaseModel):
    """What a batch insert did. A key already stored with other content is a conflict, not a
    duplicate: it is returned so the caller can reject it rather than lose it."""

    model_config = ConfigDict(extra="forbid")

    inserted: int = 0
    duplicates: int = 0
    conflicts: list[Reject] = Field(default_factory=list)
    erased: int = Field(default=0, description="turns of an owner erased since the run began")


class IngestSummary(BaseModel):
    """One archive file read into the store. Every record read is accounted for:
    ``turns_read = turns_inserted + duplicates_skipped + rejected + skipped_empty +
    skipped_erased``."""

    model_config = ConfigDict(extra="forbid")

    path: str
    format: str
    turns_read: int = 0
    turns_inserted: int = 0
    duplicates_skipped: int = 0
    rejected: int = 0
    skipped_empty: int = Field(default=0, description="messages with nothing a person saw")
    skipped_erased: int = Field(
        default=0, description="turns of an owner erased while the run went on: not written"
    )
    failed: str | None = Field(
        default=None, description="why the rest of the file could not be read, if it could not"
    )


class PromotionSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sessions: int = 0
    snapshots_created: int = 0
    turns_promoted: int = 0
    by_reason: dict[str, int] = Field(default_factory=dict)


class BackfillSummary(BaseModel):
    """The backfill flow's result, as ``mempipe backfill --json`` prints it."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    store: str
    files: list[IngestSummary] = Field(default_factory=list)
    turns_read: int = 0
    turns_inserted: int = 0
    duplicates_skipped: int = 0
    rejected: int = 0
    skipped_empty: int = 0
    skipped_erased: int = 0
    failed_files: list[str] = Field(
        default_factory=list, description="files that could not be read to the end: exit 1"
    )
    rejects_path: str | None = None
    sessions: int = Field(default=0, description="sessions that gained a snapshot")
    snapshots_created: int = 0
    turns_promoted: int = 0
    embedded: int | None = Field(
        default=None, description="turn vectors added by --embed (None: not asked to embed)"
    )
    embedding_model: str | None = None
    seconds: float = 0.0


class StoreStats(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: str
    turns: int = 0
    unpromoted_turns: int = 0
    sessions: int = 0
    snapshots: dict[str, int] = Field(
        default_factory=dict, description="snapshot count by overall extraction state, and total"
    )
    extraction: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="handler -> extraction status -> count"
    )
    memories: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="memory type -> status -> count"
    )
    failures: dict[str, int] = Field(default_factory=dict, description="failure class -> count")
    runs: dict[str, int] = Field(default_factory=dict, description="run status -> count")
    integrity: list[str] | None = Field(
        default=None,
        description="with --check: what the store's full integrity check found ([] when sound)",
    )
