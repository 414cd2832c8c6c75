"""Apply the store's pending migrations."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.migrations import migrate
from mempipe.schemas.summaries import MigrationReport


@task(name="apply-migrations", cache_policy=NO_CACHE)
def apply_migrations(store_url: str) -> MigrationReport:
    with unit_of_work(store_url, existing=True) as uow:
        return migrate(uow.schema)
