"""Migrate: apply the store's pending migrations (every command also does so on first use)."""

from __future__ import annotations

from prefect import flow

from mempipe.bootstrap import load_context
from mempipe.schemas.summaries import MigrationReport
from mempipe.tasks.migrations import apply_migrations


@flow(name="migrate")
def migrate_flow(
    store: str | None = None, config: str | None = None, store_secret: str | None = None
) -> MigrationReport:
    return apply_migrations(load_context(store, config, store_secret).store_url)
