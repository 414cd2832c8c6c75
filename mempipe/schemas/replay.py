"""Replay parameters and result."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from mempipe.credentials import NoCredentials
from mempipe.domain.failures import RetryPolicy
from mempipe.domain.reconcile import ReconcileThresholds
from mempipe.schemas.audit import ReconcileAction
from mempipe.schemas.costs import RunPlan, SpendRow
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.prompts import OfflineRule, Prompt
from mempipe.schemas.work import ExtractionVersion


class LLMSettings(BaseModel):
    """An OpenAI-compatible endpoint (``MEMPIPE_LLM_*`` variables; the key also from
    ``OPENAI_API_KEY``), and what the configuration says an extractor extracts with: the
    prompts, and the offline extractor's rules."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str | None = None
    model: str = "gpt-4o-mini"
    api_key: SecretStr = SecretStr("")
    timeout_seconds: float = Field(default=60.0, gt=0)
    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(
        default=None, gt=0, description="a budget every live request's tokens draw on"
    )
    rate_limit: str | None = Field(
        default=None,
        description="a Prefect global rate limit every request (chat and embeddings) draws on",
    )
    prompts: dict[MemoryType, Prompt] = Field(
        default_factory=dict, description="the configured prompts; a handler not here: built-in"
    )
    offline_rules: list[OfflineRule] = Field(
        default_factory=list, description="the offline extractor's configured rules"
    )


class ReplaySettings(BaseModel):
    """Everything a replay task needs to build its extractor and embedder: plain data, so it
    travels to any task runner."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    extractor: str = Field(
        default="offline", description="an extractor's name: offline, openai, or a plug-in's"
    )
    embedding_model: str = "all-MiniLM-L6-v2"
    llm: LLMSettings = LLMSettings()
    thresholds: ReconcileThresholds = ReconcileThresholds()
    retry: RetryPolicy = RetryPolicy()
    kept_answers: str | None = Field(
        default=None, description="the folder of answers a preview kept (absolute)"
    )


class ReplaySummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    store: str
    extractor: str
    embedding_model: str
    snapshots: int = 0
    extractions: int = 0
    done: int = 0
    failed_retryable: int = 0
    failed_content: int = 0
    memories_extracted: int = 0
    added: int = 0
    updated: int = 0
    reinforced: int = 0
    unembedded: int = 0
    done_elsewhere: int = Field(
        default=0,
        description="selected extractions another replay did while this one waited for the owner",
    )
    erased_meanwhile: int = Field(
        default=0,
        description="selected extractions whose owner was erased while this run went on: "
        "nothing of theirs was written",
    )
    summaries: int = Field(default=0, description="sessions the extractor summarized first")
    failure: NoCredentials | None = Field(
        default=None, description="the error most of the failed extractions failed with"
    )
    pending: int = Field(
        default=0,
        description="selected extractions left pending: the run stopped before them (a stop "
        "request), and the same command again does them",
    )
    audit_dir: str | None = None
    audit_files: list[str] = Field(default_factory=list)


class PreviewChange(BaseModel):
    """One ADD, UPDATE or REINFORCE a replay would make: the memory it would write (or
    reinforce), its version, and its text before (of the memory it updates or reinforces) and
    after (what the extraction read)."""

    model_config = ConfigDict(extra="forbid")

    memory_type: str
    action: ReconcileAction
    memory_id: str
    version: int
    superseded_id: str | None = None
    snapshot_id: str
    before: str | None = None
    after: str
    as_history: bool = False


class LostMemory(BaseModel):
    """A memory the current extraction taught from a previewed snapshot, which the previewed
    extraction no longer finds there (a replay leaves it as it is)."""

    model_config = ConfigDict(extra="forbid")

    memory_type: str
    memory_id: str
    snapshot_id: str
    text: str


class PreviewCounts(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memory_type: str
    added: int = 0
    updated: int = 0
    reinforced: int = 0
    no_longer_found: int = 0


class ReplayPreview(BaseModel):
    """What ``replay --preview`` found: what a replay of the sample would do, written nowhere."""

    model_config = ConfigDict(extra="forbid")

    store: str
    extractor: str
    extraction: dict[str, ExtractionVersion] = Field(
        description="per handler, the extraction previewed (extractor and prompt version)"
    )
    snapshot_ids: list[str] = Field(description="the previewed snapshots (the sample)")
    extractions: int = 0
    failed: int = 0
    failures: list[str] = Field(default_factory=list)
    counts: list[PreviewCounts] = Field(default_factory=list)
    total: PreviewCounts = PreviewCounts(memory_type="total")
    changes: list[PreviewChange] = Field(default_factory=list)
    no_longer_found: list[LostMemory] = Field(default_factory=list)
    requests: int = Field(default=0, description="questions the provider was asked")
    kept: int = Field(default=0, description="answers kept for the replay that follows")
    reused: int = Field(default=0, description="questions answered from answers kept before")
    erased_meanwhile: int = Field(
        default=0, description="extractions of owners erased while the preview ran: not previewed"
    )
    spent: list[SpendRow] = Field(
        default_factory=list, description="what the preview's requests spent (usage reported)"
    )
    sample_plan: RunPlan = Field(description="what the preview's extractions were planned to cost")
    plan: RunPlan = Field(description="the plan of the replay of the whole selection")
    html: str | None = None
    note: str | None = None
    seconds: float = 0.0
