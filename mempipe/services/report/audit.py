"""The Parquet audit: one row per ADD / UPDATE / REINFORCE.

Layout: ``<dir>/day=YYYY-MM-DD/run-<run_id>.parquet`` (hive partitioning on ``day``), so that
polars or DuckDB scan a date range without reading the rest. Each file holds all of one run's
rows of one day, and an export rewrites the files it touches whole (written aside, then renamed):
exporting the same run or range twice never duplicates a row.

Rows are partitioned by the day they were *applied* (``day``, the run's); each also carries
when its evidence was *observed* (``observed_at``, the snapshot's time), which a report may
select on instead: the files of every run-day holding such a row are written whole, and the
summary counts only the rows observed in the range.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from datetime import date
from itertools import islice
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.arrow import arrow_schema, to_arrow_table
from mempipe.schemas.audit import AuditRow, AuditSelection, AuditTime
from mempipe.schemas.run import RunStatus

CHUNK = 50_000
FILE_SCHEMA = arrow_schema(AuditRow).remove(arrow_schema(AuditRow).get_field_index("day"))
STORE_KEY = b"mempipe.store_id"
"""The Parquet key-value metadata naming the store that wrote a file: an erase of another store
leaves the file alone, whatever folder they share."""


def audit_file(out_dir: Path, day: str, run_id: str) -> Path:
    return out_dir / f"day={day}" / f"run-{run_id}.parquet"


def write_audit(rows: Iterable[AuditRow], out_dir: Path, store_id: str) -> list[Path]:
    """Write ``rows`` (streamed in chunks) into the audit layout, each file marked as
    ``store_id``'s; returns the files written."""
    schema = FILE_SCHEMA.with_metadata({STORE_KEY: store_id.encode()})
    writers: dict[Path, pq.ParquetWriter] = {}
    try:
        for chunk in _chunks(rows):
            table = to_arrow_table(chunk, AuditRow)
            keys = pa.table({"day": table["day"].cast(pa.string()), "run": table["run_id"]})
            for day, run_id in {(d, r) for d, r in zip(*keys.to_pydict().values(), strict=True)}:
                mask = pc.and_(pc.equal(keys["day"], day), pc.equal(keys["run"], run_id))
                part = table.filter(mask).drop_columns(["day"])
                path = audit_file(out_dir, day, run_id)
                if path not in writers:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    writers[path] = pq.ParquetWriter(_aside(path), schema)
                writers[path].write_table(part.replace_schema_metadata(schema.metadata))
    finally:
        for writer in writers.values():
            writer.close()
    for path in writers:
        os.replace(_aside(path), path)
    return sorted(writers)


def write_observed(
    uow: UnitOfWork, out_dir: Path, since: str | None, until: str | None
) -> list[Path]:
    """The audit files (whole) of every run-day holding a row observed in ``since`` .. ``until``."""
    partitions = {
        (row.run_id, row.day.isoformat())
        for row in uow.audit.audit_rows(
            AuditSelection(since=since, until=until, by=AuditTime.OBSERVED)
        )
    }
    files: list[Path] = []
    for run_id, day in sorted(partitions):
        files += write_audit(
            uow.audit.audit_rows(AuditSelection(run_id=run_id, since=day, until=day)),
            out_dir,
            uow.files.store_id(),
        )
    return sorted(set(files))


EXPORTED = "audit_exported"
"""A run's checkpoint: its audit reached Parquet."""
AUDITED_FLOWS = ("replay", "import-memories")


def export_earlier_runs(uow: UnitOfWork, out_dir: Path, *, current: str) -> list[str]:
    """The audit of earlier runs that ended without exporting it (killed, crashed), each written
    once and marked; returns their ids."""
    done = []
    for run in uow.runs.list_runs(limit=1000):
        if (
            run.run_id == current
            or run.flow not in AUDITED_FLOWS
            or run.status is RunStatus.RUNNING
            or EXPORTED in run.checkpoints
        ):
            continue
        write_audit(
            uow.audit.audit_rows(AuditSelection(run_id=run.run_id)), out_dir, uow.files.store_id()
        )
        uow.runs.set_checkpoint(run.run_id, EXPORTED, True)
        done.append(run.run_id)
    return done


def in_observed_range(frame: pl.LazyFrame, since: str | None, until: str | None) -> pl.LazyFrame:
    observed = pl.col("observed_at").dt.date()
    if since:
        frame = frame.filter(observed >= date.fromisoformat(since))
    if until:
        frame = frame.filter(observed <= date.fromisoformat(until))
    return frame


def _aside(path: Path) -> Path:
    return path.with_suffix(".parquet.partial")


def _chunks(rows: Iterable[AuditRow]) -> Iterator[list[AuditRow]]:
    stream = iter(rows)
    while chunk := list(islice(stream, CHUNK)):
        yield chunk


def scan_audit(sources: Path | list[Path]) -> pl.LazyFrame:
    """The audit as a lazy frame, ``day`` read from the partition path."""
    target = sources if isinstance(sources, list) else sources / "**" / "*.parquet"
    return pl.scan_parquet(target, hive_partitioning=True, missing_columns="insert")


def action_table(frame: pl.LazyFrame) -> list[dict[str, object]]:
    """Counts by memory type and action."""
    return (
        frame.group_by("memory_type", "action")
        .agg(pl.len().alias("count"))
        .sort("memory_type", "action")
        .collect()
        .to_dicts()
    )
