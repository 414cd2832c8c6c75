"""Apply the store's pending migrations."""

from __future__ import annotations

from contextlib import closing

from prefect import task
from prefect.cache_policies import NO_CACHE

from mempipe.adapters.store import open_store
from mempipe.migrations import migrate
from mempipe.schemas.summaries import MigrationReport


@task(name="apply-migrations", cache_policy=NO_CACHE)
def apply_migrations(store_url: str) -> MigrationReport:
    with closing(open_store(store_url)) as store:
        return migrate(store)
