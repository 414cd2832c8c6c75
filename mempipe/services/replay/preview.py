"""``replay --preview``: what a replay of some snapshots would do, found by doing it and undoing it.

The preview runs the replay's own code (:func:`mempipe.services.replay.extract.replay_batch`,
owner by owner in time order, in the batches a replay takes) inside a rehearsal: one write
transaction that sees its own writes and always rolls back (``UnitOfWork.rehearsal``). So what
it lists is what a replay run right after it would do, by construction, and the store is left
as it was: no memory, audit row, run, claim or extraction state. The provider is asked before
the rehearsal begins (the write lock is not held while a model thinks), and what it answers is
kept (:mod:`mempipe.adapters.llm.kept`) for that replay.
"""

from __future__ import annotations

import contextlib
import functools
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from mempipe import spend
from mempipe.adapters.llm.kept import KeptAnswers
from mempipe.adapters.llm.openai_compat import describing_only
from mempipe.adapters.llm.registry import extractor_for
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.adapters.store.writer_epoch import writer_epoch
from mempipe.domain.partitioning import owners_of
from mempipe.errors import MempipeError
from mempipe.progress import track
from mempipe.schemas.audit import AuditRow, AuditSelection, ReconcileAction
from mempipe.schemas.bundle import BundleSelection
from mempipe.schemas.costs import RunPlan
from mempipe.schemas.memory import MemoryStatus, MemoryType
from mempipe.schemas.replay import (
    LostMemory,
    PreviewChange,
    PreviewCounts,
    ReplayPreview,
    ReplaySettings,
)
from mempipe.schemas.selection import SnapshotSelection
from mempipe.schemas.snapshot import ExtractionStatus
from mempipe.schemas.transcript import SnapshotContent
from mempipe.schemas.work import WorkItem, WorkQuery
from mempipe.services.replay.extract import (
    ExtractionSummary,
    ReplayContext,
    current_extraction,
    replay_batch,
)
from mempipe.services.replay.owner_work import BATCH
from mempipe.services.replay.preview_page import write_preview_page

PAGE = 1000


class Rehearsed:
    """What the rehearsal found: the changes a replay would make, the memories it would no
    longer find, and the extractions that failed."""

    def __init__(
        self,
        changes: list[PreviewChange],
        lost: list[LostMemory],
        summaries: list[ExtractionSummary],
        asked: int = 0,
        reused: int = 0,
        erased: int = 0,
    ) -> None:
        self.changes, self.lost, self.summaries = changes, lost, summaries
        self.asked, self.reused = asked, reused
        """Questions the provider was asked, and those answered from what was kept before."""
        self.erased = erased
        """Extractions of owners erased while the preview asked: not previewed."""

    def counts(self) -> tuple[list[PreviewCounts], PreviewCounts]:
        by_type: dict[str, PreviewCounts] = {}
        total = PreviewCounts(memory_type="total")
        field = {
            ReconcileAction.ADD: "added",
            ReconcileAction.UPDATE: "updated",
            ReconcileAction.REINFORCE: "reinforced",
        }
        named = [(c.memory_type, field[c.action]) for c in self.changes]
        named += [(m.memory_type, "no_longer_found") for m in self.lost]
        for memory_type, name in named:
            counts = by_type.setdefault(memory_type, PreviewCounts(memory_type=memory_type))
            setattr(counts, name, getattr(counts, name) + 1)
            setattr(total, name, getattr(total, name) + 1)
        return [by_type[t] for t in sorted(by_type)], total


def sample_snapshots(
    uow: UnitOfWork, selection: SnapshotSelection, handlers: list[str], size: int, seed: int
) -> list[str]:
    """``size`` of the selected snapshots, drawn with ``seed`` from all of them in id order:
    the same draw while the snapshots are the same."""
    snapshot_ids = sorted(
        {
            i.snapshot_id
            for i in uow.work.extraction_work(
                WorkQuery(handlers=handlers, selection=selection, force=True)
            )
        }
    )
    return sorted(random.Random(seed).sample(snapshot_ids, min(size, len(snapshot_ids))))


def preview(
    uow: UnitOfWork,
    items: list[WorkItem],
    context: ReplayContext,
    handlers: list[str],
    plans: tuple[RunPlan, RunPlan],
    page: Path | None,
) -> ReplayPreview:
    """The preview of ``items`` (the replay's own selection of work) with the changed
    extraction ``context`` carries; ``page``: the kept answers' folder, to draw it there."""
    started = time.perf_counter()
    spend.take(spend.PROCESS)
    with track("preview", len(items), "extractions") as bar:
        found = rehearse(uow, items, context)
        bar.update(len(found.summaries))
    counts, total = found.counts()
    failures = [s for s in found.summaries if failed(s)]
    result = ReplayPreview(
        store=uow.url,
        extractor=context.extractor.name,
        extraction=current_extraction(context.extractor, context.llm, handlers),
        snapshot_ids=sorted({i.snapshot_id for i in items}),
        extractions=len(items),
        failed=len(failures),
        failures=[f"{s.snapshot_id} {s.handler}: {s.error}" for s in failures],
        counts=counts,
        total=total,
        changes=found.changes,
        no_longer_found=found.lost,
        requests=found.asked,
        kept=found.asked if isinstance(context.extractor, KeptAnswers) else 0,
        reused=found.reused,
        erased_meanwhile=found.erased,
        spent=spend.take(spend.PROCESS),
        sample_plan=plans[0],
        plan=plans[1],
        seconds=round(time.perf_counter() - started, 3),
    )
    if page is not None:
        users = sorted({i.user_id or "" for i in items})
        result.html = str(write_preview_page(result, page, users))
    return result


def batch_preview(
    url: str,
    request: SnapshotSelection,
    settings: ReplaySettings,
    handlers: list[str],
    plans: tuple[RunPlan, RunPlan],
) -> ReplayPreview:
    """``--via batch``: a batch is answered within a day, so its preview is its plan."""
    llm = settings.llm
    with describing_only():  # the plan alone: nothing is sent
        extractor = extractor_for(settings.extractor, llm)
    return ReplayPreview(
        store=url,
        extractor=extractor.name,
        extraction=current_extraction(extractor, llm, handlers),
        snapshot_ids=list(request.snapshot_ids or []),
        sample_plan=plans[0],
        plan=plans[1],
        note="--via batch: the plan only (a batch is answered within 24 h); preview the same "
        "selection with --via live to see what it would change",
    )


def rehearse(uow: UnitOfWork, items: list[WorkItem], context: ReplayContext) -> Rehearsed:
    taught = _taught(uow, items)
    kept = _ask_first(uow, items, context)
    asked, reused = getattr(context.extractor, "asked", 0), getattr(context.extractor, "reused", 0)
    found: set[str] = set()
    rehearsing = context.model_copy(update={"found": found})
    with uow.rehearsal():
        summaries = [s for batch in _batches(kept) for s in replay_batch(uow, batch, rehearsing)]
        changes = [
            _change(uow, row) for row in uow.audit.audit_rows(AuditSelection(run_id=context.run_id))
        ]
    found |= {c.memory_id for c in changes} | {c.superseded_id for c in changes if c.superseded_id}
    rehearsed = {i.snapshot_id for i in kept}
    lost = [m for m in taught if m.memory_id not in found and m.snapshot_id in rehearsed]
    return Rehearsed(changes, lost, summaries, asked, reused, len(items) - len(kept))


def failed(summary: ExtractionSummary) -> bool:
    return summary.status is not ExtractionStatus.DONE


def _batches(items: list[WorkItem]) -> Iterator[list[WorkItem]]:
    """Owner by owner, each in time order, owners gathered up to a replay's batch."""
    batch: list[WorkItem] = []
    for owned in owners_of(items).values():
        batch.extend(owned)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _ask_first(uow: UnitOfWork, items: list[WorkItem], context: ReplayContext) -> list[WorkItem]:
    """Every question the rehearsal will ask the extractor, asked now, outside the write lock,
    so that the rehearsal is answered from what was kept; returns the work left to rehearse.
    A failure is left for the rehearsal, which records it as a replay would. The erase fence
    holds here as at a replay's writes: an owner erased since the preview began is asked
    nothing more, what was kept of them is withdrawn (an answer kept just after the erase
    removed the rest), and their work leaves the preview."""
    extractor, epoch = context.extractor, writer_epoch()
    snapshots = {i.snapshot_id: uow.work.snapshot_content(i.snapshot_id) for i in items}
    asks: list[tuple[SnapshotContent, Callable[[], object]]] = []
    if extractor.capabilities.summaries:
        summarized = uow.work.rule_summarized(list(snapshots))
        asks += [
            (snapshots[s], functools.partial(extractor.summarize, snapshots[s])) for s in summarized
        ]
    asks += [
        (
            snapshots[i.snapshot_id],
            functools.partial(extractor.extract, snapshots[i.snapshot_id], MemoryType(i.handler)),
        )
        for i in items
    ]
    erased: set[tuple[str, str, str | None]] = set()

    def fenced(snapshot: SnapshotContent) -> bool:
        owner = (snapshot.org_id, snapshot.project_id, snapshot.user_id)
        if owner not in erased and uow.erasure.erased_since(*owner, epoch):
            erased.add(owner)
            if isinstance(extractor, KeptAnswers):
                extractor.forget(snapshot.user_id)
        return owner in erased

    for snapshot, ask in asks:
        if fenced(snapshot):
            continue
        with contextlib.suppress(MempipeError):  # the rehearsal records it as a replay would
            context.retry.run(ask, sleep=context.sleep)
        fenced(snapshot)
    return [i for i in items if (i.org_id, i.project_id, i.user_id) not in erased]


def _change(uow: UnitOfWork, row: AuditRow) -> PreviewChange:
    """The audit row the rehearsal wrote, with the text of the memory it changes."""
    target = row.superseded_id if row.action is ReconcileAction.UPDATE else None
    if row.action is ReconcileAction.REINFORCE:
        target = row.memory_id
    before = uow.memories.get_memory(row.memory_type, target) if target else None
    return PreviewChange(
        memory_type=row.memory_type,
        action=row.action,
        memory_id=row.memory_id,
        version=row.version,
        superseded_id=row.superseded_id,
        snapshot_id=row.snapshot_id or "",
        before=before["text"] if before else None,
        after=row.text,
        as_history=row.as_history,
    )


def _taught(uow: UnitOfWork, items: list[WorkItem]) -> list[LostMemory]:
    """The active memories each previewed extraction's snapshot taught (its first evidence)."""
    wanted = {(i.handler, i.snapshot_id) for i in items}
    found: list[LostMemory] = []
    for (org, project, user), owned in owners_of(items).items():
        selection = BundleSelection(org_id=org, project_id=project, user_id=user or None)
        for handler in sorted({i.handler for i in owned}):
            after = None
            while True:
                page, after = uow.transfer.export_page(handler, selection, after, PAGE)
                found += [
                    LostMemory(
                        memory_type=handler,
                        memory_id=record.id,
                        snapshot_id=record.evidence[0],
                        text=record.text,
                    )
                    for record in page
                    if record.status is MemoryStatus.ACTIVE
                    and record.evidence
                    and (handler, record.evidence[0]) in wanted
                ]
                if len(page) < PAGE:
                    break
    return found
