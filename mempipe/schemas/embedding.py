"""The embedding registry and the re-embed job's reports."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from mempipe.credentials import NoCredentials
from mempipe.schemas.memory import MEMORY_COLLECTIONS

COLLECTIONS = ("stm", *MEMORY_COLLECTIONS)
"""Everything that carries vectors: the turns, and each long-term memory collection."""


class ModelState(StrEnum):
    SERVING = "serving"
    BUILDING = "building"
    PREVIOUS = "previous"


class RegistryEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    collection: str
    model_id: str
    dimensions: int
    state: ModelState
    vector_table: str


class ModelInfo(BaseModel):
    """A model mempipe can use, as `mempipe models --json` lists it."""

    id: str
    dimensions: int
    active: bool = Field(description="serving at least one collection of this store")
    collections: list[str] = Field(default_factory=list)


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

    @property
    def complete(self) -> bool:
        """Every record has a vector of the model, or its text was refused: a provider's
        failure never counts as done."""
        return self.failed == 0 and self.vectors + self.unembeddable >= self.records


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
