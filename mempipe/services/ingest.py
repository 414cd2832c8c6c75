"""Read one archive file into the store in batches, each written in one transaction.

The store is handed the batches as they are parsed (``add_turn_batches``): a backend that can
write one batch while the next is parsed does so (SQLite), so at most two batches are in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
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
from mempipe.schemas.summaries import IngestSummary, TurnWriteResult
from mempipe.schemas.turn import Turn


def ingest_file(uow: UnitOfWork, request: IngestRequest) -> IngestSummary:
    path, run_id, rejects_file = request.path, request.run_id, request.rejects_file
    reader = ArchiveReader(path, request.format, request.defaults, request.columns, request.times)
    summary = IngestSummary(path=str(path), format=str(request.format))

    def account(result: TurnWriteResult, rejects: list[Reject], skipped: int) -> None:
        rejected = append_rejects(rejects_file, [*rejects, *result.conflicts])
        summary.turns_inserted += result.inserted
        summary.duplicates_skipped += result.duplicates
        summary.rejected += rejected
        summary.skipped_empty += skipped
        summary.skipped_erased += result.erased
        summary.turns_read += (
            result.inserted + result.duplicates + rejected + skipped + result.erased
        )

    with bulk_work(), track(path.name, reader.size, "bytes") as progress:

        def parsed() -> Iterator[tuple[list[Turn], tuple[list[Reject], int]]]:
            for turns, rejects, skipped in _batches(reader, request.batch_size):
                if stop_requested():
                    return  # asked to stop: a rerun reads the file again and adds the rest
                yield turns, (rejects, skipped)
                progress.update(reader.bytes_read)

        for result, (rejects, skipped) in uow.turns.add_turn_batches(parsed(), run_id):
            account(result, rejects, skipped)
    summary.format = str(reader.format or request.format)
    summary.failed = reader.failed
    return summary


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
