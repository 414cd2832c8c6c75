"""Migrate: apply the store's pending migrations (every command also does so on first use)."""

from __future__ import annotations

from mempipe.bootstrap import load_context
from mempipe.flows.hooks import job_flow
from mempipe.schemas.summaries import MigrationReport
from mempipe.tasks.migrations import apply_migrations


@job_flow("migrate")
def migrate_flow(
    store: str | None = None, config: str | None = None, store_secret: str | None = None
) -> MigrationReport:
    return apply_migrations(load_context(store, config, store_secret).store_url)
