"""A replay's plan (`replay --plan`): one chat request per selected extraction, one summary
request per snapshot still summarised by rule."""

from __future__ import annotations

from collections.abc import Sequence

from mempipe.adapters.llm.openai_compat import extraction_messages, summary_messages
from mempipe.adapters.llm.prompts import prompt_for
from mempipe.adapters.llm.tokens import chat_counter
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.domain.costs import cut_into_files
from mempipe.schemas.batch import BatchLimits
from mempipe.schemas.costs import CostConfig, PlanLine, RunPlan, Via
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.replay import LLMSettings
from mempipe.schemas.selection import SnapshotSelection
from mempipe.schemas.work import Stale, WorkQuery
from mempipe.services.replay.extract import snapshot_pages
from mempipe.services.run_plans import Tally, chat_tokens, run_plan


def replay_plan(
    uow: UnitOfWork,
    selection: SnapshotSelection,
    handlers: Sequence[str],
    *,
    force: bool,
    stale: Stale | None = None,
    extractor: str,
    summaries: bool,
    via: Via,
    costs: CostConfig,
    llm: LLMSettings,
    limits: BatchLimits,
) -> RunPlan:
    """One chat request per selected extraction, built as the extractor builds it; one summary
    request per snapshot still summarized by rule (with an extractor that summarizes)."""
    items = uow.work.extraction_work(
        WorkQuery(handlers=handlers, selection=selection, force=force, stale=stale)
    )
    provider = extractor != "offline"
    counter = chat_counter(llm.model)
    sizes: list[tuple[int, int]] | None = [] if via == "batch" else None
    extract, summarize = Tally(sizes=sizes), Tally(sizes=sizes)
    for page, contents, work in snapshot_pages(uow, items):
        if summaries and provider:
            for snapshot_id in uow.work.rule_summarized(page):
                messages = summary_messages(contents[snapshot_id])
                summarize.add({"messages": messages}, 1, chat_tokens(counter, messages))
        for item in work:
            prompt = prompt_for(llm, MemoryType(item.handler))
            messages = extraction_messages(contents[item.snapshot_id], prompt)
            extract.add(
                {"model": llm.model, "messages": messages}, 1, chat_tokens(counter, messages)
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
    return run_plan("replay", uow.url, via, lines, files, costs, llm, unknown)
