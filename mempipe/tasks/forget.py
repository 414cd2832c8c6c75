"""Tasks of the forget flow."""

from __future__ import annotations

from prefect import get_run_logger

from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.schemas.retention import Expiry, ForgetCount
from mempipe.services import forget as forgetting
from mempipe.tasks.policies import step


@step("forget-records")
def forget_records(
    store_url: str, expiry: Expiry, collection: str, run_id: str, batch_size: int
) -> list[ForgetCount]:
    with unit_of_work(store_url) as uow:
        counts = forgetting.forget_collection(uow, expiry, collection, run_id, batch_size)
    get_run_logger().info("forgot %d %s record(s)", sum(c.records for c in counts), collection)
    return counts


@step("redact-forgotten-files")
def redact_forgotten_files(store_url: str) -> int:
    with unit_of_work(store_url) as uow:
        rows = forgetting.redact_forgotten_files(uow)
    if rows:
        get_run_logger().info("redacted %d audit file row(s) of forgotten memories", rows)
    return rows
