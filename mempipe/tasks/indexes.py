"""Compare declared and actual search indexes; create what is absent; rebuild on request."""

from __future__ import annotations

from prefect import get_run_logger

from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.schemas.indexes import IndexState, IndexStatus
from mempipe.tasks.policies import step


@step("repair-indexes")
def repair_indexes(store_url: str, force: bool) -> list[IndexStatus]:
    with unit_of_work(store_url) as uow:
        statuses = uow.indexes.rebuild_indexes(force)
        logger = get_run_logger()
        for status in statuses:
            if status.state is IndexState.DRIFT:  # the command's report says so on stdout
                logger.info(
                    "%s drifted (%s)%s",
                    status.name,
                    "; ".join(status.differences),
                    "" if force else ": rebuild with force",
                )
            elif status.state is not IndexState.OK:
                logger.info("%s %s", status.name, status.state.value)
        return statuses
