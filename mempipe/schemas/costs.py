"""What provider work costs: the price table (configuration, ``costs:``) and a run's plan."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ModelPrice(BaseModel):
    """US dollars per million tokens; batch prices are the live ones times ``batch_ratio``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(default=0.0, ge=0)
    batch_ratio: float = Field(default=0.5, gt=0, le=1)

    def dollars(self, input_tokens: int, output_tokens: int, *, batch: bool = False) -> float:
        """What the tokens cost at the live price, or at the batch one."""
        live = (
            input_tokens * self.input_per_million + output_tokens * self.output_per_million
        ) / 1_000_000
        return live * self.batch_ratio if batch else live


def price_of(model: str, prices: dict[str, ModelPrice]) -> ModelPrice | None:
    """A model's price by its name, ``openai:text-embedding-3-small:512`` found as
    ``text-embedding-3-small``."""
    name = model.split(":")[1] if model.startswith("openai:") else model
    return prices.get(name)


DEFAULT_PRICES: dict[str, ModelPrice] = {
    "text-embedding-3-small": ModelPrice(input_per_million=0.02),
    "text-embedding-3-large": ModelPrice(input_per_million=0.13),
    "text-embedding-ada-002": ModelPrice(input_per_million=0.10),
    "gpt-4o-mini": ModelPrice(input_per_million=0.15, output_per_million=0.60),
    "gpt-4o": ModelPrice(input_per_million=2.50, output_per_million=10.00),
    "gpt-4.1-mini": ModelPrice(input_per_million=0.40, output_per_million=1.60),
    "gpt-4.1-nano": ModelPrice(input_per_million=0.10, output_per_million=0.40),
}
"""OpenAI's list prices (USD per 1M tokens, December 2026); ``costs.prices`` in
``project-config.yaml`` overrides or adds a model's."""


class CostConfig(BaseModel):
    """``costs:`` in ``project-config.yaml``."""

    model_config = ConfigDict(extra="forbid")

    prices: dict[str, ModelPrice] = Field(default_factory=lambda: dict(DEFAULT_PRICES))
    output_tokens_per_extraction: int = Field(
        default=150, ge=0, description="what a plan expects one extraction's answer to hold"
    )
    output_tokens_per_summary: int = Field(default=60, ge=0)

    @field_validator("prices", mode="after")
    @classmethod
    def _over_defaults(cls, prices: dict[str, ModelPrice]) -> dict[str, ModelPrice]:
        return {**DEFAULT_PRICES, **prices}


Via = Literal["live", "batch"]


class PlanLine(BaseModel):
    """One kind of request a run would send (or, for a local model, compute)."""

    model_config = ConfigDict(extra="forbid")

    purpose: str = Field(description="embed <collection>, extract, summarize, probe")
    model: str
    tokenizer: str
    items: int = Field(description="texts to embed, or extractions / summaries to run")
    requests: int = Field(description="HTTP requests live; lines of batch files in batch mode")
    input_tokens: int
    output_tokens: int = Field(default=0, description="expected, from the configuration")
    provider: bool = Field(description="False: computed locally, no bill")


class PlanCost(BaseModel):
    model_config = ConfigDict(extra="forbid")

    live_usd: float | None = Field(description="None: a model the price table does not hold")
    batch_usd: float | None
    unpriced_models: list[str] = Field(default_factory=list)


class PlanDuration(BaseModel):
    """How long the live run's requests take at the configured limits (None where no limit is
    set: then the provider's own limits and latency decide); a batch finishes within its
    completion window."""

    model_config = ConfigDict(extra="forbid")

    requests_per_minute: float | None
    tokens_per_minute: float | None
    live_seconds: float | None
    batch_window: str = "24h"


class RunPlan(BaseModel):
    """What a run would do, written before anything is: ``--plan``."""

    model_config = ConfigDict(extra="forbid")

    job: str
    store: str
    via: Via
    lines: list[PlanLine]
    requests: int
    input_tokens: int
    output_tokens: int
    batch_files: int = Field(description="files of requests at the provider's batch limits")
    cost: PlanCost
    duration: PlanDuration
    not_predicted: list[str] = Field(
        default_factory=list, description="requests the run may add that no plan can count"
    )


RequestKind = Literal["embedding", "extraction", "summary", "judge"]
ALL_TYPES = ""
"""A spend row's memory type where the request served several (an embedding batch)."""


class SpendRow(BaseModel):
    """What a run spent on one kind of request to one model, one day and memory type: the
    requests it made and the tokens the provider reported (``usage``); ``unreported``: the
    requests whose answer carried no usage."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    day: str
    kind: RequestKind
    model: str
    memory_type: str = ALL_TYPES
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    unreported: int = 0
    via: Via = "live"

    def add(self, other: SpendRow) -> None:
        """Count ``other``'s requests and tokens in this row."""
        self.requests += other.requests
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.unreported += other.unreported

    @property
    def key(self) -> tuple[str, str, str, str, str, str]:
        return (self.run_id, self.day, self.kind, self.model, self.memory_type, self.via)

    def cost(self, prices: dict[str, ModelPrice]) -> float | None:
        """Dollars at the price table's (batch) prices; None for a model it does not hold."""
        price = price_of(self.model, prices)
        if price is None:
            return None
        return round(
            price.dollars(self.input_tokens, self.output_tokens, batch=self.via == "batch"), 6
        )
