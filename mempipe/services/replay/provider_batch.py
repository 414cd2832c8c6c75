"""Replaying extraction through a provider's Batch API (``replay --via batch``): every selected
extraction (and each snapshot's summary, where the extractor writes them) as a chat request in
batch files; each batch's answers applied through the same replay as a live run's — validation
(with a live repair of an answer that does not validate), reconciliation, audit, one
transaction per extraction, owner by owner in time order — with the answers read from the
batch instead of asked for. Judge calls on ambiguous matches stay live.

Batches are applied in the order they were submitted, so an owner whose history spans two
files is still replayed in time order. A run first adopts the open batches a killed run of the
same scope left; a failed line, or an extraction an expired or cancelled batch never ran, is a
recorded failure of that extraction (retryable: a rerun, live or batch, does it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence

import orjson

from mempipe.adapters.llm.openai_compat import (
    OpenAIExtractor,
    extraction_messages,
    output_model,
    summary_messages,
)
from mempipe.adapters.llm.prompts import prompt_for
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.domain.failures import status_failure
from mempipe.domain.reconcile import Candidate, Verdict
from mempipe.errors import MempipeError
from mempipe.interrupts import StopRequested, stop_requested
from mempipe.schemas.batch import BatchRequest, ProviderBatch
from mempipe.schemas.costs import RequestKind
from mempipe.schemas.extraction import Extracted
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.provider import BatchInfo
from mempipe.schemas.transcript import SnapshotContent
from mempipe.schemas.work import Stale, WorkItem, WorkQuery
from mempipe.services.provider_batches import BatchWork
from mempipe.services.replay.extract import ReplayContext, snapshot_pages
from mempipe.services.replay.owner_work import replay_by_owner
from mempipe.services.replay.summary import BucketOutcome

SUMMARY = "summary"


def replay_scope(model: str, force: bool, stale: Stale | None = None) -> str:
    """Batches of one chat model, and of forced or stale replays apart from the others' (a
    stale one's by the extraction it brings up to date): a run adopts only batches it would
    have submitted itself."""
    if force:
        return f"replay:{model}:force"
    if stale:
        current = orjson.dumps({h: v.model_dump() for h, v in sorted(stale.items())})
        return f"replay:{model}:stale:{hashlib.sha256(current).hexdigest()[:12]}"
    return f"replay:{model}:pending"


def extraction_key(handler: str, snapshot_id: str) -> str:
    return f"{handler}:{snapshot_id}"


def is_summary(key: str) -> bool:
    """A summary request's key; an extraction's carries the work item (its owner too)."""
    return key.startswith(f"{SUMMARY}:")


def _asked(key: str) -> tuple[RequestKind, str | None]:
    """What a batch line asked: a summary, or an extraction of a memory type."""
    if is_summary(key):
        return "summary", None
    return "extraction", key.split(":", 1)[0]


def extraction_requests(
    uow: UnitOfWork, items: Sequence[WorkItem], extractor: OpenAIExtractor
) -> Iterator[BatchRequest]:
    """Each item's extraction request, and a summary request for each of their snapshots still
    summarized by rule, the snapshots read a page at a time."""
    for page, contents, work in snapshot_pages(uow, items):
        for snapshot_id in uow.work.rule_summarized(page):
            yield BatchRequest(
                custom_id=extraction_key(SUMMARY, snapshot_id),
                body=extractor.request_body(summary_messages(contents[snapshot_id]), None),
                items=[snapshot_id],
            )
        for item in work:
            memory_type = MemoryType(item.handler)
            prompt = prompt_for(extractor.settings, memory_type)
            messages = extraction_messages(contents[item.snapshot_id], prompt)
            yield BatchRequest(
                custom_id=extraction_key(item.handler, item.snapshot_id),
                body=extractor.request_body(messages, output_model(memory_type)),
                items=[
                    item.snapshot_id,
                    item.handler,
                    item.org_id,
                    item.project_id,
                    item.user_id or "",
                ],
            )


class BatchAnswers:
    """An extractor that answers from a batch's lines; what a batch cannot answer (a repair,
    a judge call, a summary it did not hold) goes to the live extractor."""

    def __init__(self, live: OpenAIExtractor, answers: dict[str, str | MempipeError]) -> None:
        self.live, self.answers = live, answers
        self.name, self.capabilities = live.name, live.capabilities

    def extract(self, snapshot: SnapshotContent, memory_type: MemoryType) -> list[Extracted]:
        answer = self.answers.get(extraction_key(memory_type.value, snapshot.snapshot_id))
        if answer is None:
            raise status_failure(None, "not in the batch")
        if isinstance(answer, MempipeError):
            raise answer
        messages = extraction_messages(snapshot, prompt_for(self.live.settings, memory_type))
        return self.live.memories_from(messages, answer, memory_type)

    def summarize(self, snapshot: SnapshotContent) -> str:
        answer = self.answers.get(extraction_key(SUMMARY, snapshot.snapshot_id))
        if answer is None:
            return self.live.summarize(snapshot)
        if isinstance(answer, MempipeError):
            raise answer
        return answer.strip()

    def judge(self, text: str, existing: Candidate) -> Verdict:
        return self.live.judge(text, existing)


def apply_replay_batches(
    uow: UnitOfWork,
    work: BatchWork,
    batches: list[ProviderBatch],
    live: OpenAIExtractor,
    context: ReplayContext,
    *,
    force: bool,
    stale: Stale | None = None,
) -> list[BucketOutcome]:
    """Each batch, once it ends, replayed from its answers; stops (leaving the rest open for
    the next run) when asked to."""
    outcomes: list[BucketOutcome] = []
    try:
        for batch, info in work.follow(batches):
            outcome, error = apply_batch(
                uow, work, batch, info, live, context, force=force, stale=stale
            )
            work.close(batch, info, error)
            outcomes.append(outcome)
            if stop_requested():
                break
    except StopRequested:
        pass
    return outcomes


def apply_batch(
    uow: UnitOfWork,
    work: BatchWork,
    batch: ProviderBatch,
    info: BatchInfo,
    live: OpenAIExtractor,
    context: ReplayContext,
    *,
    force: bool,
    stale: Stale | None = None,
) -> tuple[BucketOutcome, str | None]:
    answers: dict[str, str | MempipeError] = {}
    for line in work.lines(info):
        if line.custom_id not in batch.items or line.custom_id in answers:
            continue
        error = work.line_failure(line)
        if error is None:
            try:
                kind, handler = _asked(line.custom_id)
                answers[line.custom_id] = live.answer_content(
                    line.response.body,  # type: ignore[union-attr]
                    kind,
                    handler,
                )
            except MempipeError as invalid:
                error = invalid
        if error is not None:
            answers[line.custom_id] = error
    unanswered = [key for key in batch.items if key not in answers]
    first_error = next((str(a) for a in answers.values() if isinstance(a, MempipeError)), None)
    if unanswered:
        ended = status_failure(None, f"batch {batch.batch_id} ended {info.status}: not run")
        answers.update(dict.fromkeys(unanswered, ended))
        first_error = first_error or str(ended)
    extractions = [value for key, value in batch.items.items() if not is_summary(key)]
    items = [
        WorkItem(snapshot_id=s, handler=h, org_id=o, project_id=p, user_id=u or None)
        for s, h, o, p, u in extractions  # type: ignore[misc]
    ]
    extractions = {extraction_key(item.handler, item.snapshot_id) for item in items}
    outcome = replay_by_owner(
        uow,
        items,
        context.model_copy(update={"extractor": BatchAnswers(live, answers)}),
        WorkQuery(handlers=sorted({item.handler for item in items}), force=force, stale=stale),
        keep=lambda item: extraction_key(item.handler, item.snapshot_id) in extractions,
    )
    return outcome, first_error
