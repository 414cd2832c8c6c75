"""The store's schema versions, shared by every backend, and their runner.

A version is an id and a description; what it changes is the backend's own business: each
backend keeps one module per version it needs in its own ``migrations`` folder
(``mempipe/adapters/store/sqlite/migrations/0003_summary_source.py``, with an ``apply``
function), and a plug-in backend brings its folder the same way. A version a backend has no
module for changes nothing there (MongoDB needs no table rebuilds; SQLite no server indexes).
The store records the id of every version it applied; applying twice changes nothing, and
:func:`pending` only reads.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mempipe.schemas.summaries import MigrationReport


@dataclass(frozen=True)
class Migration:
    id: str
    description: str

    def step(self, package: str) -> Callable[[Any], None] | None:
        """The ``apply`` function of this version in a backend's migrations ``package``, or
        None where that backend has nothing to change."""
        name = f"{package}.{self.id}"
        if importlib.util.find_spec(name) is None:
            return None
        apply: Callable[[Any], None] = importlib.import_module(name).apply
        return apply


VERSIONS: tuple[Migration, ...] = (
    Migration("0001_initial", "Turns, snapshots, long-term memory collections, failures and runs"),
    Migration(
        "0002_extraction",
        "The audit log, the embedding registry, one active record per key and scope",
    ),
    Migration(
        "0003_summary_source", "Snapshots record who wrote their summary: the rules or an LLM"
    ),
    Migration(
        "0004_embedding_states", "The embedding registry records each collection and model's state"
    ),
    Migration(
        "0005_declarations", "What a project declared, write-once: partition keys and custom types"
    ),
    Migration("0006_mongodb_indexes", "MongoDB: text search indexes and the supersedes_id index"),
    Migration("0007_work_claims", "Extraction states record which run claimed them and until when"),
    Migration(
        "0008_run_liveness",
        "Runs record their host, pid and heartbeat; leases are locks held by a run",
    ),
    Migration("0009_user_in_turn_key", "Turn and snapshot identity includes the user"),
    Migration("0010_audit_history", "Audit rows say when an extraction was reconciled as history"),
    Migration("0011_turns_by_user", "Turns are found by user"),
    Migration("0012_vectors_by_user", "Vectors are stored per user"),
    Migration("0013_memories_by_user", "Memories are found by user"),
    Migration("0014_vector_partition_index", "A user's vectors are found through an index"),
    Migration(
        "0015_stemmed_text_with_speakers", "Text indexes stem words and hold the speaker's name"
    ),
    Migration("0016_audit_observed_at", "Audit rows carry when their evidence happened"),
    Migration("0017_erase_fence", "An erase fences its owner"),
    Migration("0018_written_files", "The files mempipe wrote that hold users' text"),
    Migration("0019_provider_batches", "What a run submitted to a provider's Batch API"),
    Migration("0020_store_identity", "The store's own id, made once"),
    Migration(
        "0021_model_options",
        "The embedding registry records how each model was asked for its sides and dimension",
    ),
    Migration("0022_vector_quantization", "Each collection declares its vector quantization"),
    Migration(
        "0023_extraction_versions", "Extractions and audit rows record the extractor and prompt"
    ),
    Migration("0024_memory_extraction", "Each memory version records its extractor and prompt"),
    Migration(
        "0025_run_spend",
        "Runs record what their provider requests spent: requests and reported tokens",
    ),
    Migration(
        "0026_embedding_bridges",
        "The embedding registry keeps a bridge per collection: a map into its serving model",
    ),
    Migration(
        "0027_retention",
        "The audit records forgetting (FORGET and the rule); a snapshot's forgotten evidence is "
        "never extracted again",
    ),
)


class Migratable(Protocol):
    """What the runner needs of a store (its :class:`~mempipe.adapters.store.base.Schema`)."""

    url: str

    def applied_migrations(self) -> list[str]: ...

    def apply_migration(self, migration: Migration) -> None: ...


def all_migrations() -> list[Migration]:
    return list(VERSIONS)


def pending(store: Migratable) -> list[Migration]:
    applied = set(store.applied_migrations())
    return [m for m in VERSIONS if m.id not in applied]


def migrate(store: Migratable) -> MigrationReport:
    """Apply every pending migration in order, each in its own transaction."""
    applied_before = store.applied_migrations()
    report = MigrationReport(store=store.url, already_applied=applied_before)
    for migration in pending(store):
        store.apply_migration(migration)
        report.applied.append(migration.id)
    return report


def report(store: Migratable, pending_only: bool = False) -> MigrationReport:
    """``pending_only``: what is not applied, changing nothing; else :func:`migrate`."""
    if not pending_only:
        return migrate(store)
    return MigrationReport(
        store=store.url,
        already_applied=store.applied_migrations(),
        pending=[m.id for m in pending(store)],
    )
