"""Import the long-term memories of another system, one file at a time, streamed: each memory
is reconciled against what the store already holds in its scope (ADD, UPDATE with the old
version kept, REINFORCE), embedded and audited exactly as extraction's are; or, ``verbatim``,
stored as it is. Every source record is its own evidence (``<format>:<its id>``), so importing
the same file again changes nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from itertools import islice

from mempipe.adapters.embedding import Vector
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.adapters.store.writer_epoch import writer_epoch
from mempipe.archives.memories import MemoryArchiveReader
from mempipe.domain.ids import stable_id
from mempipe.domain.memories import build_record, searchable_text
from mempipe.domain.reconcile import normalize
from mempipe.errors import MempipeError
from mempipe.interrupts import StopRequested, stop_requested
from mempipe.progress import track
from mempipe.rejects import append_rejects
from mempipe.schemas.audit import AuditRow, ReconcileAction
from mempipe.schemas.memory_import import (
    ImportedMemory,
    MemoryImportRequest,
    MemoryImportSummary,
)
from mempipe.schemas.reject import Reject
from mempipe.schemas.summaries import Owner, UserCount
from mempipe.schemas.transcript import SnapshotContent
from mempipe.services.embedding import embed_texts
from mempipe.services.replay.extract import (
    ReplayContext,
    audit_row,
    prejudge,
    reconcile_one,
)


def evidence_of(memory: ImportedMemory) -> SnapshotContent:
    """The source record as the evidence a memory is learnt from: its id is the same on every
    import of the record."""
    key = memory.source_id or stable_id(
        "rec",
        memory.org_id,
        memory.project_id,
        memory.user_id,
        normalize(searchable_text(memory.memory)),
    )
    return SnapshotContent(
        snapshot_id=f"{memory.source_system}:{key}",
        org_id=memory.org_id,
        project_id=memory.project_id,
        user_id=memory.user_id,
        agent_id=memory.agent_id,
        session_id=memory.session_id or "import",
        turns=[],
    )


def import_memory_file(
    uow: UnitOfWork, request: MemoryImportRequest, context: ReplayContext
) -> MemoryImportSummary:
    path, rejects_file = request.path, request.rejects_file
    reader = MemoryArchiveReader(path, request.format, request.defaults, request.memory_type)
    summary = MemoryImportSummary(run_id=context.run_id, format=request.format)
    owners: Counter[Owner] = Counter()
    with track(path.name, reader.size, "bytes") as progress:
        for batch in _batches(reader, request.batch_size):
            if stop_requested():
                break  # asked to stop: a rerun skips what is in and imports the rest
            memories = [m for m in batch if isinstance(m, ImportedMemory)]
            rejects = [r for r in batch if isinstance(r, Reject)]
            try:
                vectors, errors = _embed(uow, context, memories)
            except StopRequested:
                break
            summary.records_read += len(batch)
            owners.update((m.org_id, m.project_id, m.user_id) for m in memories)
            summary.rejected += append_rejects(rejects_file, rejects)
            summary.without_vector += sum(v is None for v in vectors)
            provider = [error for _, error in errors if error.retryable]
            summary.provider_failed += len(provider)
            if provider and summary.provider_error is None:
                summary.provider_error = str(provider[0])
            write = _verbatim if request.verbatim else _reconciled
            rows = write(uow, context, memories, vectors)
            erased = _of_erased_owners(uow, memories)
            summary.skipped_erased += erased
            summary.duplicates_skipped += len(memories) - len(rows) - erased
            for row in rows:
                if row.action is ReconcileAction.UPDATE:
                    summary.updated += 1
                elif row.action is ReconcileAction.REINFORCE:
                    summary.reinforced += 1
                else:
                    summary.added += 1
            progress.update(reader.bytes_read)
    summary.users = UserCount.of(owners)
    if reader.failed:
        summary.failed_files.append(str(path))
        summary.unread[str(path)] = reader.failed
    summary.rejects_path = str(rejects_file) if summary.rejected else None
    return summary


def _of_erased_owners(uow: UnitOfWork, memories: list[ImportedMemory]) -> int:
    """Memories of an owner erased since this run began: the erase fence dropped them (they
    are not duplicates)."""
    owners = {(m.org_id, m.project_id, m.user_id) for m in memories}
    epoch = writer_epoch()
    erased = {owner for owner in owners if uow.erased_since(*owner, epoch)}
    return sum((m.org_id, m.project_id, m.user_id) in erased for m in memories)


def _batches(
    items: Iterable[ImportedMemory | Reject], size: int
) -> Iterator[list[ImportedMemory | Reject]]:
    stream = iter(items)
    while batch := list(islice(stream, size)):
        yield batch


def _embed(
    uow: UnitOfWork, context: ReplayContext, memories: list[ImportedMemory]
) -> tuple[list[Vector | None], list[tuple[int, MempipeError]]]:
    if not memories:
        return [], []
    embedder = context.embedder
    texts = [searchable_text(m.memory) for m in memories]
    vectors, errors = embed_texts(embedder, texts, context.retry, context.sleep)
    for kind in {m.memory_type for m, v in zip(memories, vectors, strict=True) if v is not None}:
        uow.memories.ensure_vector_table(kind.value, embedder.model_id, embedder.dimensions)
    return vectors, errors


def _reconciled(
    uow: UnitOfWork,
    context: ReplayContext,
    memories: list[ImportedMemory],
    vectors: list[Vector | None],
) -> list[AuditRow]:
    """Reconciled in order, so that a repeat inside the batch reinforces what the batch added.
    With a judge, each memory is judged (outside any transaction, as in replay) and written on
    its own, so that it is judged against the memories written before it."""
    pairs = list(zip(memories, vectors, strict=True))
    groups = [[p] for p in pairs] if context.extractor.capabilities.judge else [pairs]
    rows: list[AuditRow] = []
    for group in groups:
        evidence = [evidence_of(m) for m, _ in group]
        verdicts = {}
        for (memory, vector), snapshot in zip(group, evidence, strict=True):
            verdicts |= prejudge(
                uow, memory.memory_type, [memory.memory], [vector], snapshot, context
            )
        with uow.transaction():
            written = [
                _from(row, memory)
                for (memory, vector), snapshot in zip(group, evidence, strict=True)
                if (
                    row := reconcile_one(
                        uow,
                        memory.memory_type,
                        memory.memory,
                        vector,
                        snapshot,
                        context,
                        verdicts,
                        one_memory=memory.source_id is not None,
                    )
                )
            ]
            uow.audit.add_audit(written)
        rows += written
    return rows


def _verbatim(
    uow: UnitOfWork,
    context: ReplayContext,
    memories: list[ImportedMemory],
    vectors: list[Vector | None],
) -> list[AuditRow]:
    """As they are: the source's id, times and metadata kept; an id already held is left."""
    now = datetime.now(UTC)
    rows = []
    with uow.transaction():
        for memory, vector in zip(memories, vectors, strict=True):
            snapshot = evidence_of(memory)
            record = build_record(
                memory.memory_type,
                memory.memory,
                snapshot,
                version=1,
                supersedes_id=None,
                embedding_model_id=context.embedder.model_id,
                has_embedding=vector is not None,
                now=memory.created_at or now,
            )
            record = record.model_copy(
                update={
                    "id": memory.source_id or record.id,
                    "updated_at": memory.updated_at or record.updated_at,
                    "metadata": memory.metadata,
                }
            )
            if uow.memories.get_memory(memory.memory_type.value, record.id) is not None:
                continue
            if not uow.memories.add_memory(memory.memory_type.value, record, vector):
                continue
            added = audit_row(
                context,
                snapshot,
                memory.memory_type,
                ReconcileAction.ADD,
                record.id,
                1,
                None,
                None,
                record.text,
                now,
                None,
            )
            unembedded = {} if vector is not None else {"embedding_model_id": None}
            rows.append(_from(added, memory).model_copy(update=unembedded))
        uow.audit.add_audit(rows)
    return rows


def _from(row: AuditRow, memory: ImportedMemory) -> AuditRow:
    """The audit names the system a memory came from where extraction names its extractor,
    and the record's own time as when it was observed."""
    return row.model_copy(
        update={
            "extractor": f"import:{memory.source_system}",
            "observed_at": memory.created_at or memory.updated_at,
        }
    )
