"""Tasks of the copy flow."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger

from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.schemas.bundle import (
    CopySummary,
)
from mempipe.services import copy as copying
from mempipe.tasks.policies import step


@step("copy-records")
def copy_records(
    source_url: str,
    target_url: str,
    run_id: str,
    rejects_file: str,
    with_vectors: bool,
    batch_size: int,
) -> CopySummary:
    with unit_of_work(source_url, read_only=True) as source, unit_of_work(target_url) as target:
        summary = copying.copy_store(
            source,
            target,
            run_id=run_id,
            rejects_file=Path(rejects_file),
            with_vectors=with_vectors,
            batch_size=batch_size,
        )
        logger = get_run_logger()
        logger.info("copied %s", summary.copied)
        for difference in summary.differences:
            logger.warning("differs: %s", difference)
        return summary
