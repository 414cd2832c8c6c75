"""Tasks of the erase flow."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger

from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.schemas.bundle import (
    BundleSelection,
    EraseSummary,
)
from mempipe.services import erase as erasing
from mempipe.tasks.policies import step


@step("erase-user")
def erase_user(
    store_url: str,
    selection: BundleSelection,
    dry_run: bool,
    audit_dirs: list[str],
    kept_answers: str | None = None,
) -> EraseSummary:
    with unit_of_work(store_url) as uow:
        summary = erasing.erase_user(
            uow,
            selection,
            dry_run=dry_run,
            audit_dirs=[Path(d) for d in audit_dirs],
            kept_answers=Path(kept_answers) if kept_answers else None,
        )
        logger = get_run_logger()
        logger.info("%s %s", "would erase" if dry_run else "erased", summary.counts)
        for file in summary.left:  # the run's failure says it once, on the command's error line
            logger.info("the user's text is left in %s: %s", file.path, file.left)
        return summary
