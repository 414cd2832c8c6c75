"""The Parquet audit: one row per ADD / UPDATE / REINFORCE.

Layout: ``<dir>/day=YYYY-MM-DD/run-<run_id>.parquet`` (hive partitioning on ``day``), so that
polars or DuckDB scan a date range without reading the rest. Each file holds all of one run's
rows of one day, and an export rewrites the files it touches whole (written aside, then renamed):
exporting the same run or range twice never duplicates a row.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mempipe.schemas.arrow import arrow_schema, to_arrow_table
from mempipe.schemas.audit import AuditRow

CHUNK = 50_000
FILE_SCHEMA = arrow_schema(AuditRow).remove(arrow_schema(AuditRow).get_field_index("day"))


def audit_file(out_dir: Path, day: str, run_id: str) -> Path:
    return out_dir / f"day={day}" / f"run-{run_id}.parquet"


def write_audit(rows: Iterable[AuditRow], out_dir: Path) -> list[Path]:
    """Write ``rows`` (streamed in chunks) into the audit layout; returns the files written."""
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
                    writers[path] = pq.ParquetWriter(_aside(path), FILE_SCHEMA)
                writers[path].write_table(part)
    finally:
        for writer in writers.values():
            writer.close()
    for path in writers:
        os.replace(_aside(path), path)
    return sorted(writers)


def _aside(path: Path) -> Path:
    return path.with_suffix(".parquet.partial")


def _chunks(rows: Iterable[AuditRow]) -> Iterator[list[AuditRow]]:
    stream = iter(rows)
    while chunk := list(islice(stream, CHUNK)):
        yield chunk


def scan_audit(sources: Path | list[Path]) -> pl.LazyFrame:
    """The audit as a lazy frame, ``day`` read from the partition path."""
    target = sources if isinstance(sources, list) else sources / "**" / "*.parquet"
    return pl.scan_parquet(target, hive_partitioning=True)


def action_table(frame: pl.LazyFrame) -> list[dict[str, object]]:
    """Counts by memory type and action."""
    return (
        frame.group_by("memory_type", "action")
        .agg(pl.len().alias("count"))
        .sort("memory_type", "action")
        .collect()
        .to_dicts()
    )
