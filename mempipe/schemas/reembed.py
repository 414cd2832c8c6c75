"""What a re-embed reports: each collection's vectors, the recall gate, the run's summary."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from mempipe.credentials import NoCredentials


class CollectionReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    collection: str
    model_id: str
    records: int
    vectors: int
    embedded_now: int = 0
    unembeddable: int = Field(
        default=0, description="records whose text the model refused (kept without a vector)"
    )
    failed: int = Field(
        default=0,
        description="records left without a vector by the provider's failure (error, hang, "
        "malformed answer), sent or left unsent once it was down: embeddable, so the "
        "collection is not complete",
    )
    provider_error: NoCredentials | None = Field(
        default=None, description="the provider's first failure, when ``failed``"
    )
    resumed_after: int | None = Field(
        default=None, description="the record id a crashed run's checkpoint let this run skip to"
    )
    batches: int = Field(default=0, description="provider batches applied (--via batch)")
    batches_adopted: int = Field(
        default=0, description="of those, batches an earlier run submitted and this one applied"
    )


class GateReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    queries: int
    old_recall: float
    new_recall: float
    ratio: float
    min_ratio: float
    passed: bool


class ReembedSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    store: str
    model: str
    dimensions: int
    incremental: bool = False
    collections: list[CollectionReport] = Field(default_factory=list)
    gate: GateReport | None = None
    switched: bool = False
    reason: str | None = Field(default=None, description="why the switch did not happen")

    def run_counts(self) -> dict[str, int]:
        """What the run record keeps of it."""
        reports = self.collections
        return {
            "records": sum(r.records for r in reports),
            "embedded": sum(r.embedded_now for r in reports),
            "unembeddable": sum(r.unembeddable for r in reports),
            "failed": sum(r.failed for r in reports),
            "switched": int(self.switched),
            "batches": sum(r.batches for r in reports),
        }
