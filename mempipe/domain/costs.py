"""What a plan's figures come to: cost at live and batch prices, duration at the configured
limits, and how requests are cut into batch files within a provider's limits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mempipe.schemas.batch import BatchLimits
from mempipe.schemas.costs import ModelPrice, PlanCost, PlanDuration, PlanLine, price_of


def plan_cost(lines: Sequence[PlanLine], prices: dict[str, ModelPrice]) -> PlanCost:
    """Dollars at live and at batch prices; a local line costs nothing, an unpriced one makes
    the total unknown (and is named)."""
    live = batch = 0.0
    unpriced: list[str] = []
    for line in lines:
        if not line.provider:
            continue
        price = price_of(line.model, prices)
        if price is None:
            unpriced.append(line.model)
            continue
        live += price.dollars(line.input_tokens, line.output_tokens)
        batch += price.dollars(line.input_tokens, line.output_tokens, batch=True)
    if unpriced:
        return PlanCost(live_usd=None, batch_usd=None, unpriced_models=sorted(set(unpriced)))
    return PlanCost(live_usd=round(live, 6), batch_usd=round(batch, 6))


def plan_duration(
    requests: int, tokens: int, requests_per_minute: float | None, tokens_per_minute: float | None
) -> PlanDuration:
    """The longer of the two limits' times; None when neither is set."""
    minutes = [
        amount / limit
        for amount, limit in ((requests, requests_per_minute), (tokens, tokens_per_minute))
        if limit
    ]
    return PlanDuration(
        requests_per_minute=requests_per_minute,
        tokens_per_minute=tokens_per_minute,
        live_seconds=round(max(minutes) * 60, 1) if minutes else None,
    )


@dataclass
class FileFill:
    """How full the batch file being written is: the one rule by which both a plan and a run
    cut requests into files (a file closes before a request that would take it over any
    limit; embedding inputs count only for an embeddings file)."""

    limits: BatchLimits
    embeddings: bool
    requests: int = 0
    size: int = 0
    inputs: int = 0

    def closes_before(self, request_bytes: int, request_inputs: int) -> bool:
        limits = self.limits
        return self.requests > 0 and (
            self.requests + 1 > limits.max_requests
            or self.size + request_bytes > limits.max_bytes
            or (self.embeddings and self.inputs + request_inputs > limits.max_embedding_inputs)
        )

    def add(self, request_bytes: int, request_inputs: int) -> None:
        self.requests += 1
        self.size += request_bytes
        self.inputs += request_inputs


def cut_into_files(
    sizes: Sequence[tuple[int, int]], limits: BatchLimits, *, embeddings: bool
) -> list[int]:
    """How many requests go in each file, given each request's (bytes, inputs) in order."""
    files: list[int] = []
    fill = FileFill(limits, embeddings)
    for request_bytes, request_inputs in sizes:
        if fill.closes_before(request_bytes, request_inputs):
            files.append(fill.requests)
            fill = FileFill(limits, embeddings)
        fill.add(request_bytes, request_inputs)
    if fill.requests:
        files.append(fill.requests)
    return files
