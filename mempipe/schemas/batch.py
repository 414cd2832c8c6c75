"""A provider batch as the store records it: what a run submitted to a provider's Batch API,
so that a killed run's successor finds it again instead of submitting it twice."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class BatchStatus(StrEnum):
    SUBMITTING = "submitting"
    """Its file is uploaded and recorded; the batch may or may not have been created."""
    SUBMITTED = "submitted"
    """Created at the provider (validating, in progress, finalizing)."""
    APPLIED = "applied"
    """Its results are in the store."""
    EXPIRED = "expired"
    """Ended by the provider's window: what it finished is applied, the rest is left."""
    CANCELLED = "cancelled"
    FAILED = "failed"
    """The provider refused the file (``failed``): nothing of it ran."""


OPEN = (BatchStatus.SUBMITTING, BatchStatus.SUBMITTED)
"""Batches whose requests may still be answered: a later run adopts them."""


class ProviderBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(description="mempipe's name of it: the run's id and a random part")
    run_id: str
    job: str
    scope: str = Field(description="what its requests fill, e.g. reembed:semantic:<model>")
    endpoint: str
    input_file_id: str
    batch_id: str | None = None
    status: BatchStatus = BatchStatus.SUBMITTING
    requests: int
    items: dict[str, list[int | str]] = Field(
        description="each request's custom_id and the records (or extractions) it is for"
    )
    created_at: datetime
    finished_at: datetime | None = None
    error: str | None = None


class BatchLimits(BaseModel):
    """What one input file may hold (OpenAI's Batch API: 50,000 requests, 200 MB, and for
    embeddings 50,000 inputs across its requests), and how a run follows its batches: polled
    at ``poll_first_seconds``, the wait doubling up to ``poll_max_seconds``
    (``MEMPIPE_BATCH_*``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_requests: int = Field(default=50_000, ge=1, description="requests in one batch file")
    max_bytes: int = Field(default=200 * 1024 * 1024, ge=1024, description="bytes of one file")
    max_embedding_inputs: int = Field(
        default=50_000, ge=1, description="embedding inputs across one file's requests"
    )
    poll_first_seconds: float = Field(
        default=10.0, gt=0, description="the first wait before a batch is asked about"
    )
    poll_max_seconds: float = Field(
        default=300.0, gt=0, description="the longest wait between askings (it doubles)"
    )


class BatchRequest(BaseModel):
    """One line of a batch file: the request, and the records (or extractions) it is for."""

    model_config = ConfigDict(frozen=True)

    custom_id: str
    body: dict[str, object]
    items: list[int | str]
    inputs: int = Field(default=1, description="embedding inputs it holds")
