"""Read archive files into the store in batches, each written in one transaction.

The store is handed the batches as they are parsed (``add_turn_batches``): a backend that can
write one batch while the next is parsed does so (SQLite), so at most two batches are in memory.
Many files are one stream: one writer, one progress bar, one interpreter setting for the lot,
and the batches of small files may share a transaction up to ``--batch-size`` turns.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.archives import ArchiveReader
from mempipe.archives.drafts import Skipped
from mempipe.bulk import bulk_work
from mempipe.interrupts import stop_requested
from mempipe.progress import track
from mempipe.rejects import append_rejects
from mempipe.schemas.archive import IngestRequest
from mempipe.schemas.reject import Reject
from mempipe.schemas.summaries import IngestSummary, Owner, TurnWriteResult, UserCount
from mempipe.schemas.turn import Turn


def ingest_file(uow: UnitOfWork, request: IngestRequest) -> IngestSummary:
    (summary,) = ingest_files(uow, [request])
    return summary


def ingest_files(uow: UnitOfWork, requests: Sequence[IngestRequest]) -> list[IngestSummary]:
    """Archive files read one after another as one stream of batches (a batch never mixes
    files), each file accounted, rejected and reported on its own; all of one run."""
    (run_id,) = {request.run_id for request in requests}
    readers = [ArchiveReader(r.path, r.format, r.defaults, r.columns, r.times) for r in requests]
    summaries = [IngestSummary(path=str(r.path), format=str(r.format)) for r in requests]

    owners: list[Counter[Owner]] = [Counter() for _ in requests]

    def account(index: int, result: TurnWriteResult, rejects: list[Reject], skipped: int) -> None:
        summary = summaries[index]
        rejected = append_rejects(requests[index].rejects_file, [*rejects, *result.conflicts])
        summary.turns_inserted += result.inserted
        summary.duplicates_skipped += result.duplicates
        summary.rejected += rejected
        summary.identity_conflicts += sum(r.identity_conflict for r in rejects)
        summary.skipped_empty += skipped
        summary.skipped_erased += result.erased
        summary.turns_read += (
            result.inserted + result.duplicates + rejected + skipped + result.erased
        )

    label = requests[0].path.name if len(requests) == 1 else f"{len(requests)} archives"
    total = sum(reader.size for reader in readers)
    with bulk_work(), track(label, total, "bytes") as progress:

        def parsed() -> Iterator[tuple[list[Turn], tuple[int, list[Reject], int]]]:
            before = 0
            for index, (request, reader) in enumerate(zip(requests, readers, strict=True)):
                for turns, rejects, skipped in _batches(reader, request.batch_size):
                    if stop_requested():
                        return  # asked to stop: a rerun reads the files again, adds the rest
                    owners[index].update((t.org_id, t.project_id, t.user_id) for t in turns)
                    yield turns, (index, rejects, skipped)
                    progress.update(before + reader.bytes_read)
                before += reader.size

        written = uow.turns.add_turn_batches(
            parsed(), run_id, shared_up_to=min(request.batch_size for request in requests)
        )
        for result, (index, rejects, skipped) in written:
            account(index, result, rejects, skipped)
    for summary, reader, request, read in zip(summaries, readers, requests, owners, strict=True):
        summary.format = str(reader.format or request.format)
        summary.failed = reader.failed
        summary.users = UserCount.of(read)
    return summaries


def _batches(
    items: Iterable[Turn | Reject | Skipped], size: int
) -> Iterator[tuple[list[Turn], list[Reject], int]]:
    stream = iter(items)
    while batch := list(islice(stream, size)):
        yield (
            [item for item in batch if isinstance(item, Turn)],
            [item for item in batch if isinstance(item, Reject)],
            sum(isinstance(item, Skipped) for item in batch),
        )
