"""Apply the store's pending migrations."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.bootstrap import given_store
from mempipe.migrations import migrate
from mempipe.schemas.summaries import MigrationReport


@task(name="apply-migrations", cache_policy=NO_CACHE)
@given_store(existing=True)
def apply_migrations(uow: UnitOfWork) -> MigrationReport:
    return migrate(uow.schema)
