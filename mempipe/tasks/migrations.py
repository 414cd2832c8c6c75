"""Apply the store's pending migrations."""

from __future__ import annotations

from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.migrations import migrate
from mempipe.schemas.summaries import MigrationReport
from mempipe.tasks.policies import step


@step("apply-migrations")
def apply_migrations(store_url: str) -> MigrationReport:
    with unit_of_work(store_url, existing=True) as uow:
        return migrate(uow.schema)
