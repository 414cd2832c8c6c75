"""Replay one (snapshot, handler): extract, embed, reconcile, write and audit.

Everything one extraction changes (new versions, reinforcements, audit rows, its state set to
done) is written in one transaction, so a run killed at any point leaves each extraction either
wholly done or still pending: the next run finishes the rest and redoes nothing. Where no judge
is asked, a batch's extractions share that transaction (one commit, not one each); a batch
whose write fails is written again one extraction at a time, so one bad write costs the others
nothing. A write that fails transiently (a busy store) is retried whole under the run's retry
policy; one that still fails is recorded as the extraction's failure, never dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from mempipe.adapters.embedding import Embedder, Vector
from mempipe.adapters.llm.base import Extractor
from mempipe.adapters.llm.prompts import prompt_for
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.adapters.store.writer_epoch import writer_epoch
from mempipe.credentials import NoCredentials
from mempipe.domain.failures import RetryPolicy, failure_class
from mempipe.domain.memories import build_record, memory_id
from mempipe.domain.reconcile import (
    Candidate,
    Judge,
    ReconcileThresholds,
    Verdict,
    decide,
    planned_write,
)
from mempipe.domain.scope import Scope, scope_of
from mempipe.errors import MempipeError
from mempipe.interrupts import StopRequested, stop_requested
from mempipe.progress import track
from mempipe.schemas.audit import AuditRow, ReconcileAction
from mempipe.schemas.extraction import Extracted, key_of, searchable_text
from mempipe.schemas.failure import Failure, FailureClass
from mempipe.schemas.memory import MEMORY_MODELS, MemoryStatus, MemoryType
from mempipe.schemas.replay import LLMSettings
from mempipe.schemas.search import CandidateQuery, Near
from mempipe.schemas.snapshot import ExtractionState, ExtractionStatus
from mempipe.schemas.transcript import SnapshotContent
from mempipe.schemas.work import ExtractionVersion, Stale, WorkItem
from mempipe.services.embedding import embed_texts

SNAPSHOT_PAGE = 500
"""Snapshots read from the store at a time while requests are planned or written."""


class ExtractionSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    snapshot_id: str
    handler: str
    status: ExtractionStatus
    extracted: int = 0
    added: int = 0
    updated: int = 0
    reinforced: int = 0
    unembedded: int = 0
    attempts: int = 0
    failure_class: FailureClass | None = None
    error: NoCredentials | None = None
    erased: bool = False


class ReplayContext(BaseModel):
    """What every extraction of a run shares."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    run_id: str
    extractor: Extractor
    embedder: Embedder
    thresholds: ReconcileThresholds = ReconcileThresholds()
    retry: RetryPolicy = RetryPolicy()
    sleep: Callable[[float], Any] = time.sleep
    llm: LLMSettings = LLMSettings()
    """Its prompts: an extractor with prompts extracts with them."""
    found: set[str] | None = None
    """Where given (a preview), the memories an extraction met again without writing: the one
    its snapshot already taught, or the one a repeat would only reinforce again."""
    summarized: list[str] | None = None
    """Where given (a run counting them), the snapshots the extractor summarized."""

    def extraction(self, memory_type: MemoryType) -> ExtractionVersion:
        return extraction_version(self.extractor, self.llm, memory_type)


def extraction_version(
    extractor: Extractor, llm: LLMSettings, memory_type: MemoryType
) -> ExtractionVersion:
    """What an extraction of ``memory_type`` records it ran with (its state, its audit rows, the
    memory versions it writes): the extractor, and its prompt's version where it has prompts."""
    prompt = prompt_for(llm, memory_type).version if extractor.capabilities.prompts else None
    return ExtractionVersion(extractor=extractor.name, prompt_version=prompt)


def current_extraction(extractor: Extractor, llm: LLMSettings, handlers: Sequence[str]) -> Stale:
    """Per handler, what an extraction would run with now (``replay --stale``)."""
    return {h: extraction_version(extractor, llm, MemoryType(h)) for h in handlers}


def replay_one(uow: UnitOfWork, item: WorkItem, context: ReplayContext) -> ExtractionSummary:
    return replay_batch(uow, [item], context)[0]


def replay_batch(
    uow: UnitOfWork, items: Sequence[WorkItem], context: ReplayContext
) -> list[ExtractionSummary]:
    """Extract every item, embed all their memories in one batch (a model encodes a batch far
    faster than the same texts one call at a time), then reconcile and write the items in the
    items' order: in one transaction where no judge is asked, else each judged and written in
    its own. Asked to stop, it extracts no more and returns the summaries of the items it
    wrote; the others stay as they were."""
    extractor = context.extractor
    extracted: list[tuple[int, WorkItem, SnapshotContent, list[Extracted]]] = []
    results: dict[int, ExtractionSummary] = {}
    snapshots = {i.snapshot_id: uow.work.snapshot_content(i.snapshot_id) for i in items}
    if extractor.capabilities.summaries:
        summarize(uow, [snapshots[s] for s in uow.work.rule_summarized(list(snapshots))], context)
    for position, item in enumerate(items):
        if stop_requested():
            break  # asked to stop: what is extracted is written, the rest stays pending
        snapshot = snapshots[item.snapshot_id]
        memory_type = MemoryType(item.handler)
        try:
            found = context.retry.run(
                lambda s=snapshot, t=memory_type: extractor.extract(s, t), sleep=context.sleep
            )
        except MempipeError as exc:
            results[position] = _failed(uow, item, snapshot, context, exc)
            continue
        except StopRequested:
            break
        extracted.append((position, item, snapshot, found))
    flat = [
        (snapshot, MemoryType(item.handler), m)
        for _, item, snapshot, found in extracted
        for m in found
    ]
    vectors = iter(embed_each(uow, context, flat))
    observed = uow.work.snapshot_times([item.snapshot_id for _, item, _, _ in extracted])
    unwritten = [
        _Unwritten(
            position,
            item,
            snapshot,
            found,
            [next(vectors) for _ in found],
            observed.get(item.snapshot_id),
        )
        for position, item, snapshot, found in extracted
    ]
    if extractor.capabilities.judge:
        for write in unwritten:  # each judged against what the ones before it wrote
            results[write.position] = _write(uow, write, context)
    else:
        for write, summary in zip(unwritten, _write_together(uow, unwritten, context), strict=True):
            results[write.position] = summary
    return [results[position] for position in range(len(items)) if position in results]


Verdicts = dict[tuple[str, str], Verdict]


@dataclass
class _Unwritten:
    """One extraction extracted and embedded, not yet written."""

    position: int
    item: WorkItem
    snapshot: SnapshotContent
    extracted: list[Extracted]
    vectors: list[Vector | None]
    observed: datetime | None
    """When its snapshot happened, for its audit rows."""

    def written(self, rows: list[AuditRow] | None) -> ExtractionSummary:
        """Its summary once written: ``rows`` None where the erase fence dropped it."""
        item = self.item
        if rows is None:
            return ExtractionSummary(
                snapshot_id=item.snapshot_id,
                handler=item.handler,
                status=ExtractionStatus.DONE,
                erased=True,
            )
        return ExtractionSummary(
            snapshot_id=item.snapshot_id,
            handler=item.handler,
            status=ExtractionStatus.DONE,
            extracted=len(self.extracted),
            unembedded=sum(v is None for v in self.vectors),
            attempts=item.attempts + 1,
            added=sum(r.action is ReconcileAction.ADD for r in rows),
            updated=sum(r.action is ReconcileAction.UPDATE for r in rows),
            reinforced=sum(r.action is ReconcileAction.REINFORCE for r in rows),
        )


def _write(uow: UnitOfWork, write: _Unwritten, context: ReplayContext) -> ExtractionSummary:
    """One extraction judged, then written in a transaction of its own."""
    verdicts = prejudge(
        uow, MemoryType(write.item.handler), write.extracted, write.vectors, write.snapshot, context
    )
    epoch = writer_epoch()

    def written() -> list[AuditRow] | None:
        with uow.transaction():
            return _apply(uow, write, context, epoch, verdicts)

    try:
        return write.written(context.retry.run(written, sleep=context.sleep))
    except MempipeError as exc:
        return _failed(uow, write.item, write.snapshot, context, exc, step="write")


def _write_together(
    uow: UnitOfWork, unwritten: list[_Unwritten], context: ReplayContext
) -> list[ExtractionSummary]:
    """The extractions written in one transaction, in their order; if it fails, each in its
    own, so that the one that cannot be written is recorded and the others are not lost."""
    if not unwritten:
        return []  # every extraction failed: no write lock taken for nothing
    epoch = writer_epoch()

    def written() -> list[list[AuditRow] | None]:
        with uow.transaction():
            return [_apply(uow, write, context, epoch) for write in unwritten]

    try:
        applied = context.retry.run(written, sleep=context.sleep)
    except MempipeError:
        return [_write(uow, write, context) for write in unwritten]
    return [write.written(rows) for write, rows in zip(unwritten, applied, strict=True)]


def _apply(
    uow: UnitOfWork,
    write: _Unwritten,
    context: ReplayContext,
    epoch: datetime,
    verdicts: Verdicts | None = None,
) -> list[AuditRow] | None:
    """Reconcile, audit and mark done one extraction, inside the caller's transaction; None
    where its owner was erased after ``epoch``."""
    item, snapshot = write.item, write.snapshot
    if uow.erased_since(snapshot.org_id, snapshot.project_id, snapshot.user_id, epoch):
        return None
    memory_type = MemoryType(item.handler)
    rows = [
        row
        for memory, vector in zip(write.extracted, write.vectors, strict=True)
        if (
            row := reconcile_one(
                uow, memory_type, memory, vector, snapshot, context, verdicts, write.observed
            )
        )
    ]
    uow.audit.add_audit(rows)
    uow.work.set_extraction_state(
        item.snapshot_id,
        ExtractionState(
            handler=item.handler,
            status=ExtractionStatus.DONE,
            attempts=item.attempts + 1,
            **context.extraction(memory_type).model_dump(),
        ),
    )
    return rows


def embed_each(
    uow: UnitOfWork,
    context: ReplayContext,
    memories: Sequence[tuple[SnapshotContent, MemoryType, Extracted]],
) -> list[Vector | None]:
    """One vector per memory, ``None`` where it cannot be had. A batch the provider refuses is
    retried item by item, so one bad memory does not cost the others their vectors; a memory
    left without one is still stored, and the next re-embed run retries it. A text extracted
    more than once in the batch (a fact restated across an owner's snapshots) is embedded once
    and its vector given to each; a failure is recorded for each memory it left without one."""
    if not memories:
        return []
    embedder = context.embedder
    texts = [searchable_text(m) for _, _, m in memories]
    distinct = list(dict.fromkeys(texts))
    found, errors = embed_texts(embedder, distinct, context.retry, context.sleep)
    at = {text: position for position, text in enumerate(distinct)}
    vectors = [found[at[text]] for text in texts]
    failed = dict(errors)
    for position, text in enumerate(texts):
        if at[text] in failed:
            snapshot, memory_type, _ = memories[position]
            _record(uow, context, snapshot, memory_type, "embed", failed[at[text]])
    for memory_type in {t for (_, t, _), v in zip(memories, vectors, strict=True) if v is not None}:
        uow.memories.ensure_vector_table(memory_type.value, embedder.model_id, embedder.dimensions)
    return vectors


def summarize(uow: UnitOfWork, snapshots: list[SnapshotContent], context: ReplayContext) -> None:
    """Replace the deterministic summaries with the extractor's; a failure keeps the old one and
    is recorded. Asked to stop, it asks for no more (the request in flight is its last)."""
    extractor = context.extractor
    with track("summarize", len(snapshots), "sessions") as bar:
        for done, snapshot in enumerate(snapshots, start=1):
            if stop_requested():
                return
            try:
                text = context.retry.run(
                    lambda s=snapshot: extractor.summarize(s), sleep=context.sleep
                )
            except MempipeError as exc:
                _record(uow, context, snapshot, None, "summarize", exc)
                continue
            except StopRequested:
                return
            uow.work.set_snapshot_summary(snapshot.snapshot_id, text, extractor.name)
            if context.summarized is not None:
                context.summarized.append(snapshot.snapshot_id)
            bar.update(done)


def prejudge(
    uow: UnitOfWork,
    memory_type: MemoryType,
    extracted: Sequence[Extracted],
    vectors: Sequence[Vector | None],
    snapshot: SnapshotContent,
    context: ReplayContext,
) -> Verdicts:
    """Ask the judge about ambiguous pairs before the write transaction, so that no lock is held
    while an LLM thinks. Inside the transaction a pair without a verdict (the candidates changed
    meanwhile) is added: nothing is overwritten on a guess."""
    extractor = context.extractor
    verdicts: Verdicts = {}
    if not extractor.capabilities.judge:
        return verdicts
    band = (context.thresholds.ambiguous_from, context.thresholds.reinforce_at)
    for memory, vector in zip(extracted, vectors, strict=True):
        if vector is None or key_of(memory) is not None:
            continue
        text = searchable_text(memory)
        scope = scope_for(memory_type, snapshot)
        near = Near(vector=vector, model_id=context.embedder.model_id)
        asked = CandidateQuery(memory_type=memory_type.value, scope=scope, near=near, k=1)
        for candidate in uow.memories.memory_candidates(asked):
            if candidate.similarity is not None and band[0] <= candidate.similarity < band[1]:
                try:
                    verdicts[(text, candidate.memory_id)] = context.retry.run(
                        lambda c=candidate, t=text: extractor.judge(t, c), sleep=context.sleep
                    )
                except MempipeError as exc:
                    _record(uow, context, snapshot, memory_type, "judge", exc)
    return verdicts


def scope_for(memory_type: MemoryType, snapshot: SnapshotContent) -> Scope:
    visibility = MEMORY_MODELS[memory_type].default_visibility
    return scope_of(
        snapshot.org_id, snapshot.project_id, snapshot.user_id, snapshot.agent_id, visibility
    )


def reconcile_one(
    uow: UnitOfWork,
    memory_type: MemoryType,
    memory: Extracted,
    vector: Vector | None,
    snapshot: SnapshotContent,
    context: ReplayContext,
    verdicts: Verdicts | None = None,
    observed: datetime | None = None,
    one_memory: bool = False,
) -> AuditRow | None:
    """Decide and apply ADD, UPDATE or REINFORCE inside the memory's own scope. Runs inside the
    caller's write transaction: no other writer can add the same fact between the read of the
    candidates and the write (and a unique index on active keys backs that up). ``observed``:
    when the snapshot happened, for the audit row (read once per extraction by the caller).
    None: nothing was written (the snapshot taught it already, or the erase fence dropped it).
    ``one_memory``: the snapshot is another system's record, one memory (:func:`decide`)."""
    taught = memory_id(memory_type, memory, snapshot)
    if uow.memories.get_memory(memory_type.value, taught) is not None:
        _found(context, taught)
        return None  # this snapshot already taught it (a replay): it counts once
    model_id = context.embedder.model_id if vector is not None else None
    near = Near(vector=vector, model_id=model_id) if vector is not None and model_id else None
    text, key = searchable_text(memory), key_of(memory)
    candidates = uow.memories.memory_candidates(
        CandidateQuery(
            memory_type=memory_type.value,
            scope=scope_for(memory_type, snapshot),
            key=key,
            near=near,
            k=context.thresholds.candidates,
            taught_by=snapshot.snapshot_id if one_memory else None,
        )
    )

    def from_verdicts(new_text: str, candidate: Candidate) -> Verdict:
        return (verdicts or {}).get((new_text, candidate.memory_id), Verdict.ADD)

    judge: Judge | None = from_verdicts if verdicts else None
    decision = decide(
        text,
        key,
        snapshot.snapshot_id,
        candidates,
        context.thresholds,
        judge,
        one_memory=one_memory,
    )
    times = (
        uow.work.snapshot_times([snapshot.snapshot_id, *decision.target.evidence])
        if decision.action is ReconcileAction.UPDATE and decision.target is not None
        else None
    )
    write = planned_write(decision, snapshot.snapshot_id, times)
    now = datetime.now(UTC)
    if write.nothing:
        _found(context, decision.target.memory_id if decision.target else None)
        return None
    if write.reinforce is not None:
        version = uow.memories.reinforce_memory(
            memory_type.value, write.reinforce, snapshot.snapshot_id
        )
        return audit_row(
            context,
            snapshot,
            memory_type,
            write.action,
            write.reinforce,
            version,
            None,
            decision.similarity,
            text,
            now,
            observed,
        )
    version = 1
    if write.supersede is not None:
        version = uow.memories.supersede_memory(memory_type.value, write.supersede) + 1
    record = build_record(
        memory_type,
        memory,
        snapshot,
        version=version,
        supersedes_id=write.supersede,
        embedding_model_id=model_id,
        has_embedding=vector is not None,
        now=now,
        extraction=context.extraction(memory_type),
    )
    if write.history:
        record = record.model_copy(update={"status": MemoryStatus.SUPERSEDED})
    if not uow.memories.add_memory(memory_type.value, record, vector):
        return None
    row = audit_row(
        context,
        snapshot,
        memory_type,
        write.action,
        record.id,
        version,
        write.supersede,
        decision.similarity,
        text,
        now,
        observed,
    )
    return row.model_copy(update={"as_history": True}) if write.history else row


def _found(context: ReplayContext, memory_id: str | None) -> None:
    if context.found is not None and memory_id is not None:
        context.found.add(memory_id)


def audit_row(
    context: ReplayContext,
    snapshot: SnapshotContent,
    memory_type: MemoryType,
    action: ReconcileAction,
    memory_id: str,
    version: int,
    superseded_id: str | None,
    similarity: float | None,
    text: str,
    now: datetime,
    observed: datetime | None,
) -> AuditRow:
    """What one reconciliation did, as the audit keeps it."""
    return AuditRow(
        run_id=context.run_id,
        at=now,
        day=now.date(),
        org_id=snapshot.org_id,
        project_id=snapshot.project_id,
        user_id=snapshot.user_id,
        agent_id=snapshot.agent_id,
        memory_type=memory_type.value,
        action=action,
        memory_id=memory_id,
        version=version,
        superseded_id=superseded_id,
        similarity=None if similarity is None else round(similarity, 6),
        snapshot_id=snapshot.snapshot_id,
        **context.extraction(memory_type).model_dump(),
        embedding_model_id=context.embedder.model_id,
        text=text,
        observed_at=observed,
    )


def _failed(
    uow: UnitOfWork,
    item: WorkItem,
    snapshot: SnapshotContent,
    context: ReplayContext,
    error: MempipeError,
    step: str = "extract",
) -> ExtractionSummary:
    """The extraction failed at ``step``: recorded, and its state says whether to retry."""
    failure = _record(uow, context, snapshot, MemoryType(item.handler), step, error)
    status = (
        ExtractionStatus.FAILED_RETRYABLE
        if failure.failure_class is FailureClass.ENVIRONMENTAL
        else ExtractionStatus.FAILED_CONTENT
    )
    attempts = item.attempts + failure.attempts
    state = ExtractionState(
        handler=item.handler, status=status, attempts=attempts, last_error=str(error)
    )
    uow.work.set_extraction_state(item.snapshot_id, state)
    return ExtractionSummary(
        snapshot_id=item.snapshot_id,
        handler=item.handler,
        status=status,
        attempts=attempts,
        failure_class=failure.failure_class,
        error=str(error),
    )


def _record(
    uow: UnitOfWork,
    context: ReplayContext,
    snapshot: SnapshotContent,
    memory_type: MemoryType | None,
    step: str,
    error: MempipeError,
) -> Failure:
    failure = Failure(
        run_id=context.run_id,
        step=f"{step}:{memory_type.value}" if memory_type else step,
        failure_class=failure_class(error),
        error_type=str(getattr(error, "kind", type(error).__name__)),
        error=str(error),
        attempts=getattr(error, "attempts", 1),
        org_id=snapshot.org_id,
        project_id=snapshot.project_id,
        snapshot_id=snapshot.snapshot_id,
        handler=memory_type.value if memory_type else None,
        at=datetime.now(UTC),
    )
    uow.audit.add_failure(failure)
    return failure


def memory_embedding_model(uow: UnitOfWork, configured: str) -> str:
    """The model that serves the store's memories (semantic, the collection every replay and
    import writes), else ``configured`` for a store that serves none yet."""
    return uow.models.serving_model(MemoryType.SEMANTIC.value) or configured


def snapshot_pages(
    uow: UnitOfWork, items: Sequence[WorkItem]
) -> Iterator[tuple[list[str], dict[str, SnapshotContent], list[WorkItem]]]:
    """The items a page of snapshots at a time, in their order: the page's snapshot ids, their
    content read from the store, and the page's items."""
    snapshot_ids = list(dict.fromkeys(item.snapshot_id for item in items))
    by_snapshot: dict[str, list[WorkItem]] = {}
    for item in items:
        by_snapshot.setdefault(item.snapshot_id, []).append(item)
    for start in range(0, len(snapshot_ids), SNAPSHOT_PAGE):
        page = snapshot_ids[start : start + SNAPSHOT_PAGE]
        contents = {s: uow.work.snapshot_content(s) for s in page}
        yield page, contents, [item for s in page for item in by_snapshot[s]]
