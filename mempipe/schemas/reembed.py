"""What a re-embed reports: each collection's vectors, the recall gate, the run's summary."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from mempipe.credentials import NoCredentials
from mempipe.schemas.costs import RunPlan, SpendRow
from mempipe.schemas.embedding import Bridge, BridgeUse
from mempipe.schemas.search import Hit


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
    old_bridged: int = Field(
        default=0,
        description="queries the serving model could not embed: its recall for them was measured "
        "through the bridge (the new model's queries over the serving model's vectors)",
    )
    bridge: BridgeUse | None = None


class ReembedSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    store: str
    model: str
    dimensions: int
    incremental: bool = False
    collections: list[CollectionReport] = Field(default_factory=list)
    gate: GateReport | None = None
    bridges: list[Bridge] = Field(
        default_factory=list, description="the bridges fitted before the move (--bridge)"
    )
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


class SampledRecord(BaseModel):
    """A record drawn for a move's preview: as a search returns it (its id, message id and
    identity), the text it is embedded from, whether a search can return it (an active
    version), and the serving model's vector of it (None: it has none)."""

    model_config = ConfigDict(extra="forbid")

    rowid: int
    hit: Hit
    text: str
    searchable: bool = True
    vector: list[float] | None = None


class CollectionPreview(BaseModel):
    """One collection of a previewed move: its sample, and how the new model arranges it
    beside the serving one."""

    model_config = ConfigDict(extra="forbid")

    collection: str
    serving_model: str | None = Field(description="the model that serves it now (None: none)")
    records: int = Field(description="records in the collection")
    sampled: int = Field(description="records drawn and embedded with the new model")
    unembeddable: int = Field(default=0, description="of those, texts the new model refused")
    failed: int = Field(
        default=0, description="of those, left without a vector by the provider's failure"
    )
    provider_error: NoCredentials | None = Field(
        default=None, description="the provider's first failure, when ``failed``"
    )
    neighbour_agreement: float | None = Field(
        default=None,
        description="the mean share of each sampled record's 10 nearest (in the sample, in "
        "its user's records) that both models find: a measure that needs no labelled "
        "queries (None: nothing serves, or too few records)",
    )


class GatePreview(BaseModel):
    """The recall gate as predicted: the serving model's recall@k measured over the whole
    collection (a read), the new model's estimated from the sample's ranks
    (``domain.recall_estimate``), and the serving model's estimated the same way, which says
    how far such an estimate is off on this collection."""

    model_config = ConfigDict(extra="forbid")

    source: str
    queries: int
    k: int = 10
    old_recall: float = Field(description="the serving model's, measured as the gate measures it")
    new_recall: float = Field(description="the new model's, estimated from the sample")
    ratio: float
    min_ratio: float
    passes: bool = Field(description="the gate's predicted decision")
    old_recall_from_sample: float = Field(
        description="the serving model's, estimated from the sample as the new model's is"
    )
    old_heavy_tailed: bool = Field(
        default=False,
        description="the serving model's scores read as heavy-tailed (domain.recall_estimate)",
    )
    new_heavy_tailed: bool = Field(
        default=False, description="the new model's scores read as heavy-tailed"
    )


class ReembedPreview(BaseModel):
    """What ``reembed --preview`` found, written nowhere: the whole move's plan and cost, and
    what the new model does to a sample of each collection."""

    model_config = ConfigDict(extra="forbid")

    store: str
    model: str
    dimensions: int
    sample: int = Field(description="records asked for, per collection")
    seed: int
    collections: list[CollectionPreview] = Field(default_factory=list)
    gate: GatePreview | None = None
    spent: list[SpendRow] = Field(
        default_factory=list, description="what the sample's requests spent (usage reported)"
    )
    sample_plan: RunPlan = Field(description="what embedding the sample was planned to cost")
    plan: RunPlan = Field(description="the plan of the whole move")
    html: str | None = None
    seconds: float = 0.0
