"""The machinery every job's ``--plan`` shares: requests tallied as a run would build them,
their tokens by the provider's own tokenizer, priced at live and batch rates. Each job's plan is
its own (``services/reembed/plan.py``, ``services/backfill/plan.py``, ``services/replay/plan.py``);
this knows no job. Reads only; records nothing."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import orjson

from mempipe.adapters.embedding.openai_compat import BATCH as EMBEDDING_REQUEST_TEXTS
from mempipe.adapters.llm.tokens import ChatMessage, TokenCounter, embedding_counter
from mempipe.adapters.llm.tokens import chat_tokens as counted_chat_tokens
from mempipe.domain.costs import plan_cost, plan_duration
from mempipe.schemas.costs import CostConfig, PlanLine, RunPlan, Via
from mempipe.schemas.replay import LLMSettings
from mempipe.services.embedding import PROBE_TEXT

PAGE = 1000
LINE_OVERHEAD = 96
"""Bytes a batch file's line holds beside its request's body (custom id, method, URL)."""


@dataclass
class Tally:
    """A line's figures as requests are counted, with each request's size for the batch files."""

    items: int = 0
    requests: int = 0
    tokens: int = 0
    sizes: list[tuple[int, int]] | None = None

    def add(self, body: dict[str, object], inputs: int, tokens: int) -> None:
        self.items += inputs
        self.requests += 1
        self.tokens += tokens
        if self.sizes is not None:
            self.sizes.append((len(orjson.dumps(body)) + LINE_OVERHEAD, inputs))


def is_provider_model(model_id: str) -> bool:
    """Whether an embedding model is reached over HTTP (billed), not computed here: the
    built-in OpenAI-compatible provider's (a plug-in's models are planned as local)."""
    return model_id.startswith("openai:")


def request_chunks(
    texts: Sequence[str], model_id: str, *, query: bool = False
) -> Iterator[list[str]]:
    """The texts of each embeddings request, as the embedder cuts and sends them: a model
    declared with a prefix for the side (documents, or ``query``) is sent each text behind it,
    and bills its tokens."""
    from mempipe.adapters.embedding.registry import options_for

    options = options_for(model_id)
    prefix = (options.query if query else options.document).prefix
    for start in range(0, len(texts), EMBEDDING_REQUEST_TEXTS):
        yield [prefix + text for text in texts[start : start + EMBEDDING_REQUEST_TEXTS]]


def embedding_line(purpose: str, model_id: str, counter: TokenCounter, tally: Tally) -> PlanLine:
    """A line of texts to embed; a local model sends no request and bills nothing."""
    provider = is_provider_model(model_id)
    return PlanLine(
        purpose=purpose,
        model=model_id,
        tokenizer=counter.name,
        items=tally.items,
        requests=tally.requests if provider else 0,
        input_tokens=tally.tokens,
        provider=provider,
    )


def count_page(
    tally: Tally, page: list[str], model_id: str, counter: TokenCounter, *, query: bool = False
) -> None:
    for texts in request_chunks(page, model_id, query=query):
        tally.add({"input": texts}, len(texts), sum(counter.count(texts)))


def chat_tokens(counter: TokenCounter, messages: list[dict[str, str]]) -> int:
    return counted_chat_tokens(counter, [ChatMessage(**m) for m in messages])


def probe_line(model_id: str) -> PlanLine:
    """The probe's text, as a document and, for a model declared with two sides, as a query."""
    from mempipe.adapters.embedding.registry import options_for

    counter = embedding_counter(model_id)
    provider = is_provider_model(model_id)
    options = options_for(model_id)
    sides = [options.document] if options.symmetric else [options.document, options.query]
    return PlanLine(
        purpose="probe",
        model=model_id,
        tokenizer=counter.name,
        items=len(sides),
        requests=len(sides) if provider else 0,
        input_tokens=sum(counter.count([side.prefix + PROBE_TEXT for side in sides])),
        provider=provider,
    )


def cut_line(purpose: str, model_id: str, vectors: int) -> PlanLine:
    """Vectors cut from those the store holds: no request, no token."""
    return PlanLine(
        purpose=purpose,
        model=model_id,
        tokenizer="none: cut from stored vectors",
        items=vectors,
        requests=0,
        input_tokens=0,
        provider=False,
    )


def run_plan(
    job: str,
    store_url: str,
    via: Via,
    lines: list[PlanLine],
    files: int,
    costs: CostConfig,
    llm: LLMSettings,
    not_predicted: list[str],
) -> RunPlan:
    billed = [line for line in lines if line.provider]
    requests = sum(line.requests for line in billed)
    tokens_in = sum(line.input_tokens for line in billed)
    tokens_out = sum(line.output_tokens for line in billed)
    return RunPlan(
        job=job,
        store=store_url,
        via=via,
        lines=lines,
        requests=requests,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        batch_files=files,
        cost=plan_cost(lines, costs.prices),
        duration=plan_duration(
            requests, tokens_in + tokens_out, llm.requests_per_minute, llm.tokens_per_minute
        ),
        not_predicted=not_predicted,
    )
