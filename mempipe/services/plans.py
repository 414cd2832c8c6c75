"""What a run would send a provider, counted before it sends anything (``--plan``): the same
selection the run makes, the same requests it would build, their tokens by the provider's own
tokenizer, priced at live and batch rates. Reads only; records nothing."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from mempipe.adapters.embedding.openai_compat import BATCH as EMBEDDING_REQUEST_TEXTS
from mempipe.adapters.llm.openai_compat import extraction_messages, summary_messages
from mempipe.adapters.llm.tokens import (
    ChatMessage,
    TokenCounter,
    chat_counter,
    chat_tokens,
    embedding_counter,
)
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.archives.reader import ArchiveReader
from mempipe.domain.costs import cut_into_files, plan_cost, plan_duration
from mempipe.domain.spoken import spoken_text
from mempipe.schemas.batch import BatchLimits
from mempipe.schemas.costs import CostConfig, PlanLine, RunPlan, Via
from mempipe.schemas.identity import IdentityDefaults
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.replay import LLMSettings
from mempipe.schemas.selection import SnapshotSelection
from mempipe.schemas.turn import Turn
from mempipe.services.reembed import PROBE_TEXT
from mempipe.services.replay_batch import snapshot_pages

PAGE = 1000
LINE_OVERHEAD = 96
"""Bytes a batch file's line holds beside its request's body (custom id, method, URL)."""


@dataclass
class _Tally:
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


def request_chunks(texts: Sequence[str]) -> Iterator[list[str]]:
    """The texts of each embeddings request, as the embedder cuts them."""
    for start in range(0, len(texts), EMBEDDING_REQUEST_TEXTS):
        yield list(texts[start : start + EMBEDDING_REQUEST_TEXTS])


def reembed_plan(
    uow: UnitOfWork,
    collections: Sequence[str],
    model_id: str,
    *,
    incremental: bool,
    batch_size: int,
    via: Via,
    costs: CostConfig,
    llm: LLMSettings,
    limits: BatchLimits,
) -> RunPlan:
    """Every record still without a vector of the model the run fills (the serving one, for an
    incremental run), read in pages; each page cut into requests as the embedder cuts it."""
    lines = [_probe_line(model_id)]
    files = 0
    for collection in collections:
        target = model_id
        if incremental:
            serving = uow.models.active_embedding(collection)
            target = serving[0] if serving is not None else model_id
        counter = embedding_counter(target)
        tally = _Tally(sizes=[] if via == "batch" else None)
        page_size = EMBEDDING_REQUEST_TEXTS if via == "batch" else batch_size
        for page in _missing_texts(uow, collection, target, page_size):
            for texts in request_chunks(page):
                tally.add({"model": target, "input": texts}, len(texts), sum(counter.count(texts)))
        if not tally.items:
            continue
        if tally.sizes is not None:
            files += len(cut_into_files(tally.sizes, limits, embeddings=True))
        lines.append(_embedding_line(f"embed {collection}", target, counter, tally))
    return _plan("reembed", uow.url, via, lines, files, costs, llm, [])


def backfill_plan(
    uow: UnitOfWork | None,
    store_url: str,
    turn_texts: Iterable[str],
    model_id: str,
    costs: CostConfig,
    llm: LLMSettings,
) -> RunPlan:
    """The archives' turns, embedded by the turns' serving model (the configured one for a new
    store), as ``backfill --embed`` would: every turn read counts, including any the store
    already holds (a backfill skips those, so the figures are an upper bound)."""
    if uow is not None:
        serving = uow.models.active_embedding("stm")
        model_id = serving[0] if serving is not None else model_id
    counter = embedding_counter(model_id)
    tally = _Tally()
    page: list[str] = []
    for text in turn_texts:
        page.append(text)
        if len(page) == PAGE:
            _count_page(tally, page, model_id, counter)
            page = []
    _count_page(tally, page, model_id, counter)
    lines = [_probe_line(model_id)]
    if tally.items:
        lines.append(_embedding_line("embed stm", model_id, counter, tally))
    return _plan(
        "backfill",
        store_url,
        "live",
        lines,
        0,
        costs,
        llm,
        ["turns the store already holds are counted, though a backfill skips them"],
    )


def archive_texts(
    paths: Sequence[Path], fmt: str, defaults: IdentityDefaults, columns: dict[str, str]
) -> Iterator[str]:
    """The text each turn of the archives is embedded from, streamed (nothing is kept)."""
    for path in paths:
        for item in ArchiveReader(path, fmt, defaults, columns):
            if isinstance(item, Turn):
                yield spoken_text(item.name, item.content)


def _embedding_line(purpose: str, model_id: str, counter: TokenCounter, tally: _Tally) -> PlanLine:
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


def _count_page(tally: _Tally, page: list[str], model_id: str, counter: TokenCounter) -> None:
    for texts in request_chunks(page):
        tally.add({"input": texts}, len(texts), sum(counter.count(texts)))


def replay_plan(
    uow: UnitOfWork,
    selection: SnapshotSelection,
    handlers: Sequence[str],
    *,
    force: bool,
    extractor: str,
    summaries: bool,
    via: Via,
    costs: CostConfig,
    llm: LLMSettings,
    limits: BatchLimits,
) -> RunPlan:
    """One chat request per selected extraction, built as the extractor builds it; one summary
    request per snapshot still summarized by rule (with an extractor that summarizes)."""
    items = uow.work.extraction_work(selection, handlers, force=force)
    provider = extractor != "offline"
    counter = chat_counter(llm.model)
    sizes: list[tuple[int, int]] | None = [] if via == "batch" else None
    extract, summarize = _Tally(sizes=sizes), _Tally(sizes=sizes)
    for page, contents, work in snapshot_pages(uow, items):
        if summaries and provider:
            for snapshot_id in uow.work.rule_summarized(page):
                messages = summary_messages(contents[snapshot_id])
                summarize.add({"messages": messages}, 1, _chat_tokens(counter, messages))
        for item in work:
            messages = extraction_messages(contents[item.snapshot_id], MemoryType(item.handler))
            extract.add(
                {"model": llm.model, "messages": messages}, 1, _chat_tokens(counter, messages)
            )
    files = len(cut_into_files(sizes, limits, embeddings=False)) if sizes else 0
    model = llm.model if provider else extractor
    lines = [
        PlanLine(
            purpose="extract",
            model=model,
            tokenizer=counter.name,
            items=extract.items,
            requests=extract.requests if provider else 0,
            input_tokens=extract.tokens,
            output_tokens=extract.items * costs.output_tokens_per_extraction if provider else 0,
            provider=provider,
        )
    ]
    if summarize.items:
        lines.append(
            PlanLine(
                purpose="summarize",
                model=model,
                tokenizer=counter.name,
                items=summarize.items,
                requests=summarize.requests,
                input_tokens=summarize.tokens,
                output_tokens=summarize.items * costs.output_tokens_per_summary,
                provider=provider,
            )
        )
    unknown = (
        [
            "judge requests for ambiguous matches (one per memory close to a known one)",
            "a repair request for each answer that does not validate",
            "embedding the extracted memories (about the extractions' output tokens)",
        ]
        if provider
        else []
    )
    return _plan("replay", uow.url, via, lines, files, costs, llm, unknown)


def _chat_tokens(counter: TokenCounter, messages: list[dict[str, str]]) -> int:
    return chat_tokens(counter, [ChatMessage(**m) for m in messages])


def _missing_texts(
    uow: UnitOfWork, collection: str, model_id: str, batch_size: int
) -> Iterator[list[str]]:
    after = 0
    while batch := uow.vectors.records_missing_vectors(collection, model_id, after, batch_size):
        after = batch[-1][0]
        yield [text or "" for _, text in batch]


def _probe_line(model_id: str) -> PlanLine:
    counter = embedding_counter(model_id)
    provider = is_provider_model(model_id)
    return PlanLine(
        purpose="probe",
        model=model_id,
        tokenizer=counter.name,
        items=1,
        requests=1 if provider else 0,
        input_tokens=sum(counter.count([PROBE_TEXT])),
        provider=provider,
    )


def _plan(
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
