"""Numbered, idempotent store migrations and their runner.

Each ``NNNN_name.py`` module holds one migration with a function per backend that needs it:
``sqlite(conn)`` and ``mongodb(store)``. The store records the id of every migration it applied;
applying twice changes nothing, and :func:`pending` only reads.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from importlib import resources
from types import ModuleType
from typing import TYPE_CHECKING

from mempipe.schemas.summaries import MigrationReport

if TYPE_CHECKING:
    from mempipe.adapters.store.base import Schema

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.py$")


@dataclass(frozen=True)
class Migration:
    id: str
    module: ModuleType

    @property
    def description(self) -> str:
        return (self.module.__doc__ or "").strip().splitlines()[0] if self.module.__doc__ else ""


def all_migrations() -> list[Migration]:
    names = sorted(
        entry.name for entry in resources.files(__name__).iterdir() if _NAME.match(entry.name)
    )
    return [
        Migration(
            id=name.removesuffix(".py"), module=importlib.import_module(f"{__name__}.{name[:-3]}")
        )
        for name in names
    ]


def pending(store: Schema) -> list[Migration]:
    applied = set(store.applied_migrations())
    return [m for m in all_migrations() if m.id not in applied]


def migrate(store: Schema) -> MigrationReport:
    """Apply every pending migration in order, each in its own transaction."""
    applied_before = store.applied_migrations()
    report = MigrationReport(store=store.url, already_applied=applied_before)
    for migration in pending(store):
        store.apply_migration(migration)
        report.applied.append(migration.id)
    return report
