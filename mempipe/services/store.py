"""The store itself, as ``mempipe init``, ``migrate`` and ``stats`` see it."""

from __future__ import annotations

from mempipe import migrations
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.errors import StoreDamagedError
from mempipe.schemas.summaries import MigrationReport, StoreStats


def create(uow: UnitOfWork) -> MigrationReport:
    """Every migration applied (a store that is there is only brought up to date)."""
    return migrations.migrate(uow.schema)


def migrate(uow: UnitOfWork, pending: bool) -> MigrationReport:
    return migrations.report(uow.schema, pending_only=pending)


def stats(uow: UnitOfWork, check: bool) -> StoreStats:
    """The store's counts; ``check``: its full integrity check first, refusing a damaged one."""
    problems = uow.schema.check_integrity(full=True) if check else None
    if problems:
        raise StoreDamagedError(uow.url, "; ".join(problems[:5]))
    result = uow.schema.stats()
    result.integrity = problems
    return result
