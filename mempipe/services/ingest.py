"""Read one archive file into the store in batches, each written in one transaction."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import islice
from pathlib import Path

from mempipe.adapters.store import Store
from mempipe.archives import ArchiveReader
from mempipe.progress import track
from mempipe.rejects import append_rejects
from mempipe.schemas.archive import ArchiveFormat
from mempipe.schemas.identity import IdentityDefaults
from mempipe.schemas.reject import Reject
from mempipe.schemas.summaries import IngestSummary, TurnWriteResult
from mempipe.schemas.turn import Turn


def ingest_file(
    store: Store,
    path: Path,
    archive_format: ArchiveFormat,
    defaults: IdentityDefaults,
    *,
    run_id: str | None,
    rejects_file: Path,
    batch_size: int = 5000,
    columns: Mapping[str, str] | None = None,
) -> IngestSummary:
    reader = ArchiveReader(path, archive_format, defaults, columns)
    read = inserted = duplicates = rejected = 0
    with track(path.name, reader.size, "bytes") as progress:
        items = iter(reader)
        while batch := list(islice(items, batch_size)):
            turns = [item for item in batch if isinstance(item, Turn)]
            rejects = [item for item in batch if isinstance(item, Reject)]
            result = store.insert_turns(turns, run_id) if turns else TurnWriteResult()
            rejects.extend(result.conflicts)
            rejected += append_rejects(rejects_file, rejects)
            read += len(turns)
            inserted += result.inserted
            duplicates += result.duplicates
            progress.update(reader.bytes_read)
    return IngestSummary(
        path=str(path),
        format=(reader.format or archive_format).value,
        turns_read=read,
        turns_inserted=inserted,
        duplicates_skipped=duplicates,
        rejected=rejected,
    )
