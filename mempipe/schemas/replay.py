"""Replay parameters and result."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from mempipe.domain.failures import RetryPolicy
from mempipe.domain.reconcile import ReconcileThresholds
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.prompts import Prompt


class LLMSettings(BaseModel):
    """An OpenAI-compatible endpoint (``MEMPIPE_LLM_*`` variables; the key also from
    ``OPENAI_API_KEY``)."""

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
    audit_dir: str | None = None
    audit_files: list[str] = Field(default_factory=list)
