"""The store port, by role: each service takes the narrowest role it needs, and a backend
implements them all (:class:`Store`, their union). The twin backends file each role in a module
of the same name (``sqlite/turns.py`` and ``mongo/turns.py``, ...)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from mempipe.domain.promotion import TurnStamp
from mempipe.domain.reconcile import Candidate
from mempipe.migrations import Migration
from mempipe.schemas.audit import EVERY_ROW, AuditRow, AuditSelection
from mempipe.schemas.batch import ProviderBatch
from mempipe.schemas.bundle import BundleSelection, StoredUser
from mempipe.schemas.config import CustomTypeConfig
from mempipe.schemas.costs import SpendRow
from mempipe.schemas.embedding import Bridge, ModelRegistration, RegistryEntry
from mempipe.schemas.failure import Failure
from mempipe.schemas.indexes import IndexStatus, Quantization
from mempipe.schemas.memory import MemoryRecord
from mempipe.schemas.reembed import SampledRecord
from mempipe.schemas.retention import Expiry, ForgetCount
from mempipe.schemas.run import RunRecord, RunStatus, WrittenFile
from mempipe.schemas.search import CandidateQuery, Hit, Near, ReadFilter
from mempipe.schemas.snapshot import ExtractionState, Snapshot
from mempipe.schemas.summaries import StoreStats, TurnWriteResult
from mempipe.schemas.transcript import SnapshotContent
from mempipe.schemas.turn import Turn
from mempipe.schemas.work import WorkItem, WorkQuery

C = TypeVar("C")
TurnBatches = Iterable[tuple[Sequence[Turn], C]]
"""Batches of turns, each with what its caller keeps beside it, handed back with its result."""
TurnResults = Iterator[tuple[TurnWriteResult, C]]


class Turns(Protocol):
    """Short-term memory: turns, written once per key, and the snapshots promoted from them."""

    def add_turns(self, turns: Sequence[Turn], run_id: str | None) -> TurnWriteResult:
        """Insert a batch in one transaction; existing keys are skipped, never overwritten."""
        ...

    def add_turn_batches(
        self, batches: TurnBatches[C], run_id: str | None, shared_up_to: int = 0
    ) -> TurnResults[C]:
        """:meth:`add_turns` of each batch, in order, each result with what came beside its
        batch. A backend may write one batch while the caller makes the next (SQLite does),
        and may commit consecutive batches together while they hold at most ``shared_up_to``
        turns in all (SQLite does: a directory of tiny files is not a transaction a file);
        a result is handed back only once its batch is committed."""
        ...

    def count_unpromoted_turns(self) -> int: ...

    def iter_unpromoted_turns(self, page_size: int = 5000) -> Iterator[TurnStamp]:
        """Turns without a snapshot, ordered by (org, project, session, turn_seq), paged."""
        ...

    def add_snapshots(self, snapshots: Sequence[Snapshot]) -> set[str]:
        """Insert snapshots and mark their turns promoted, atomically; returns the ids of those
        that were new (an id already stored is left as it is)."""
        ...

    def add_snapshot_batches(
        self, batches: Iterable[tuple[Sequence[Snapshot], C]]
    ) -> Iterator[tuple[set[str], C]]:
        """:meth:`add_snapshots` of each batch, in order, as :meth:`add_turn_batches`."""
        ...


class OneBatchAtATime:
    """The batch paths of a store whose writes wait outside Python already (a server's): each
    batch written in turn."""

    def add_turn_batches(
        self: Turns, batches: TurnBatches[C], run_id: str | None, shared_up_to: int = 0
    ) -> TurnResults[C]:
        for turns, context in batches:
            yield self.add_turns(turns, run_id), context

    def add_snapshot_batches(
        self: Turns, batches: Iterable[tuple[Sequence[Snapshot], C]]
    ) -> Iterator[tuple[set[str], C]]:
        for snapshots, context in batches:
            yield self.add_snapshots(snapshots), context


class WorkQueue(Protocol):
    """Snapshots as extraction work: what is runnable, what a snapshot holds, each
    (snapshot, handler)'s state."""

    def extraction_work(self, query: WorkQuery) -> list[WorkItem]:
        """The pairs the query asks for, in the order they run (by the snapshot's time)."""
        ...

    def snapshot_content(self, snapshot_id: str) -> SnapshotContent: ...

    def snapshot_times(self, snapshot_ids: Sequence[str]) -> dict[str, datetime]:
        """When each snapshot's conversation happened (its first turn's time, else when it was
        cut); snapshots without a time are left out."""
        ...

    def rule_summarized(self, snapshot_ids: Sequence[str]) -> list[str]: ...

    def set_snapshot_summary(self, snapshot_id: str, summary: str, source: str) -> None: ...

    def set_extraction_state(self, snapshot_id: str, state: ExtractionState) -> None: ...


class Memories(Protocol):
    """Long-term memories and their reconciliation: candidates, new versions, reinforcements;
    written inside one unit-of-work transaction per extraction."""

    def ensure_vector_table(self, memory_type: str, model_id: str, dimensions: int) -> str: ...

    def memory_candidates(self, asked: CandidateQuery) -> list[Candidate]: ...

    def add_memory(
        self, memory_type: str, record: MemoryRecord, vector: list[float] | None
    ) -> bool:
        """Store a new record (and its vector); False when it was not written: its owner was
        erased after the writing work began (the erase fence)."""
        ...

    def supersede_memory(self, memory_type: str, memory_id: str) -> int: ...

    def reinforce_memory(self, memory_type: str, memory_id: str, snapshot_id: str) -> int: ...

    def get_memory(self, memory_type: str, memory_id: str) -> dict[str, Any] | None: ...


class AuditLog(Protocol):
    """What runs did: every ADD / UPDATE / REINFORCE, and every recorded failure."""

    def add_audit(self, rows: Sequence[AuditRow]) -> None: ...

    def audit_rows(self, selection: AuditSelection = EVERY_ROW) -> Iterator[AuditRow]: ...

    def add_failure(self, failure: Failure) -> None: ...

    def failure_counts(
        self, run_id: str | None = None, since: str | None = None, until: str | None = None
    ) -> dict[str, int]: ...


class Vectors(Protocol):
    """Vectors beside the records, one set per (collection, model)."""

    def register_model(self, registration: ModelRegistration) -> str:
        """Create (or find) the vector table of (collection, model), in ``state`` if new, with
        the options the model is asked with (recorded once, with the model)."""
        ...

    def vector_columns(self, collection: str, model_id: str) -> tuple[str, ...]: ...

    def record_id_bounds(self, collection: str) -> tuple[int, int] | None:
        """The lowest and highest record id of a collection; None when it is empty."""
        ...

    def records_missing_vectors(
        self, collection: str, model_id: str, after_id: int, limit: int, until_id: int | None = None
    ) -> list[tuple[int, str]]:
        """(id, text) of records after ``after_id`` (up to ``until_id``) without a vector
        of ``model_id``, in id order."""
        ...

    def set_vectors(
        self, collection: str, model_id: str, vectors: Sequence[tuple[int, list[float]]]
    ) -> int: ...

    def vector_counts(self, collection: str, model_id: str) -> tuple[int, int]: ...

    def record_refs(
        self, collection: str, after_id: int, limit: int
    ) -> list[tuple[int, str, str | None]]:
        """(record id, the id a search hit gives it, a turn's message id) of the records
        after ``after_id``, in id order: what a move's preview draws its sample from."""
        ...

    def sampled_records(
        self, collection: str, model_id: str | None, rowids: Sequence[int]
    ) -> list[SampledRecord]:
        """The records of these ids, each with the vector of ``model_id`` it has (if any)."""
        ...


class Registry(Protocol):
    """Which model serves each collection, and the blue/green moves between models (the rules:
    :mod:`mempipe.domain.reembed`)."""

    def registry(self) -> list[RegistryEntry]: ...

    def bridges(self) -> list[Bridge]:
        """Each collection's bridge into its serving model, where one is fitted."""
        ...

    def keep_bridge(self, bridge: Bridge) -> None: ...

    def active_embedding(self, collection: str) -> tuple[str, int] | None:
        """The active (model id, dimensions) of a collection, None before its first vector."""
        ...

    def serving_model(self, collection: str) -> str | None: ...

    def wait_searchable(self, collections: Sequence[str], model_id: str) -> None:
        """Return once searches with ``model_id`` see every collection's records (a search
        engine that builds and syncs indexes asynchronously is waited for; bounded)."""
        ...

    def switch_models(self, collections: Sequence[str], model_id: str) -> None: ...

    def rollback_models(self, collections: Sequence[str]) -> list[str]: ...

    def finalize_models(self, collections: Sequence[str]) -> list[str]: ...


class Search(Protocol):
    """Reads of turns and memories by text, by vector, and both fused."""

    def search_text(self, source: str, query: str, filters: ReadFilter, k: int) -> list[Hit]: ...

    def search_vector(self, source: str, near: Near, filters: ReadFilter, k: int) -> list[Hit]: ...

    def search_hybrid(
        self, source: str, query: str, near: Near | None, filters: ReadFilter, k: int, pool: int
    ) -> list[Hit]:
        """Text and vector rankings (``pool`` deep each) fused by reciprocal rank; without a
        vector, the text ranking alone."""
        ...


class IndexAdmin(Protocol):
    """Text and vector indexes, checked against the declarations and rebuilt."""

    def index_status(self) -> list[IndexStatus]: ...

    def rebuild_indexes(self, force: bool) -> list[IndexStatus]: ...


class RunLog(Protocol):
    """Runs: their parameters, process, outcome and checkpoints."""

    def start_run(self, run: RunRecord) -> None: ...

    def finish_run(
        self, run_id: str, status: RunStatus, counts: dict[str, int], error: str | None = None
    ) -> None:
        """Record the outcome; the run's leases end with it."""
        ...

    def get_run(self, run_id: str) -> RunRecord | None: ...

    def list_runs(self, *, running_only: bool = False, limit: int = 50) -> list[RunRecord]: ...

    def set_checkpoint(self, run_id: str, name: str, value: Any) -> None:
        """Record how far a run got under ``name``, so that a crashed run can be resumed."""
        ...

    def resume_point(self, flow: str, name: str, run_id: str) -> Any | None:
        """The ``name`` checkpoint of the flow's latest run other than ``run_id``, when that run
        did not complete (it crashed or failed); None otherwise."""
        ...

    def add_spend(self, rows: Sequence[SpendRow]) -> None:
        """Add what requests spent to what the store holds for the same run, day, kind,
        model, memory type and way."""
        ...

    def spend(
        self, run_id: str | None = None, since: str | None = None, until: str | None = None
    ) -> list[SpendRow]:
        """What was spent: a run's, or the days ``since`` .. ``until`` (ISO dates, included)."""
        ...


class Leases(Protocol):
    """Named locks held by live runs, and the heartbeats that keep them."""

    def acquire_lease(self, name: str, run_id: str, lease: timedelta) -> str | None:
        """Take the named lease for ``run_id`` (or renew it); None when taken, else the run
        that holds it. A lease held by a run that is no longer running, or not renewed within
        ``lease``, is free."""
        ...

    def release_leases(self, run_id: str, names: Sequence[str] | None = None) -> None:
        """Give up the run's leases (all of them when ``names`` is None)."""
        ...

    def heartbeat(self, run_id: str, lease: timedelta) -> None:
        """A sign of life: the run's ``heartbeat_at`` is now, and its leases last ``lease``."""
        ...

    def lease_holders(self) -> dict[str, str]: ...


class Schema(Protocol):
    """The store itself: its place, migrations, write-once declarations and figures."""

    url: str
    partition_keys: tuple[str, ...]
    custom_types: tuple[str, ...]

    def load_declarations(self) -> None: ...

    def declare(
        self, partition_keys: Sequence[str], custom_types: Sequence[CustomTypeConfig]
    ) -> list[tuple[str, str]]: ...

    quantization: Mapping[str, Quantization]
    """Each collection's declared vector-index quantization."""

    def declare_quantization(self, declared: Mapping[str, Quantization]) -> None:
        """Record each collection's quantization as declared now (changeable: a change leaves
        the vector indexes drifted until `rebuild-indexes --force`)."""
        ...

    def applied_migrations(self) -> list[str]: ...

    def check_integrity(self, *, full: bool = False) -> list[str]:
        """What the backend finds wrong with the store's own files (none: sound). Every write
        starts with the quick form; ``full``: the thorough one (``stats --check``)."""
        ...

    def apply_migration(self, migration: Migration) -> None: ...

    def stats(self) -> StoreStats: ...

    def record_capabilities(self) -> None:
        """Record in the store what its server can do (search, vector search), as the store is
        prepared: a store on a server without search keeps its search indexes pending."""
        ...

    def require_search(self, job: str) -> None:
        """Refuse ``job`` before it writes anything when the store's server has no search."""
        ...

    def require_reconcilable(self, memory_types: Sequence[str]) -> None:
        """Refuse a reconciliation before it starts when an owner's memories of a type are
        more than it can compare (on a server without vector search, by exact scan)."""
        ...

    def write_transaction(self) -> AbstractContextManager[None]:
        """A transaction that holds the write lock from its start (reads inside it see no
        concurrent writer): reconciliation runs inside one (``UnitOfWork.transaction``)."""
        ...

    def rehearsal(self) -> AbstractContextManager[None]:
        """One write transaction that always rolls back: the write transactions taken inside
        it are part of it, so work done inside sees its own writes and leaves the store as it
        was (``replay --preview``)."""
        ...

    def close(self) -> None: ...


class Transfer(Protocol):
    """Every record of a collection, verbatim: what export, import and copy move."""

    def export_page(
        self, collection: str, selection: BundleSelection, after: Any, limit: int
    ) -> tuple[list[BaseModel], Any]:
        """Up to ``limit`` records of a bundle collection after the cursor ``after`` (None: from
        the start), and the cursor to pass next; memories in every version."""
        ...

    def export_vectors(
        self, collection: str, model_id: str, selection: BundleSelection, after: Any, limit: int
    ) -> tuple[list[tuple[str, list[float]]], Any]:
        """Pages of ``(record reference, vector)`` of ``model_id`` for a bundle collection
        (``turns`` or a memory type), ``limit`` records at a time (a page may hold fewer
        vectors); a reference is a memory's id or a turn's key. The cursor is None at the end."""
        ...

    def record_rowids(self, collection: str, refs: Sequence[str]) -> dict[str, int]:
        """The store's own record ids for references it holds (what ``set_vectors`` takes)."""
        ...

    def add_runs(self, runs: Sequence[RunRecord]) -> set[str]:
        """Runs as recorded elsewhere (their times and counts kept); returns the ids added (a
        run id already present is left alone)."""
        ...


class Erasure(Protocol):
    """Data requests: one user's data removed."""

    def erase_user(self, selection: BundleSelection, *, dry_run: bool) -> dict[str, int]:
        """Delete the user's turns, snapshots with their extraction states and failures, and
        private memories in every version with their text-index entries and vectors; redact the
        text of the user's audit rows (kept, so the audit still counts what happened). Returns
        what went (or, with ``dry_run``, would go) by kind. The erase is recorded as a fence
        on the owner in the same transaction."""
        ...

    def erased_since(
        self, org_id: str, project_id: str, user_id: str | None, epoch: datetime
    ) -> bool:
        """Whether this owner was erased after ``epoch``: work begun before must not write
        anything of theirs again."""
        ...

    def stored_users(self, selection: BundleSelection) -> list[StoredUser]:
        """The users holding turns or long-term records within ``selection`` (every field
        given narrows it), ordered by org, project and user."""
        ...

    def erased_owners(self, selection: BundleSelection) -> list[BundleSelection]:
        """The owners erased from the store within ``selection``, once each, oldest first."""
        ...


class Retention(Protocol):
    """Forgetting by a retention policy: what it expires, and the forgetting of it."""

    def expired_counts(self, expiry: Expiry) -> list[ForgetCount]:
        """What ``expiry`` expires, per owner, collection and rule (``forget --plan``)."""
        ...

    def queue_expired(self, expiry: Expiry, collection: str) -> int:
        """Hold what ``expiry`` expires in ``collection`` for :meth:`forget_queued`; how many."""
        ...

    def forget_queued(
        self, collection: str, limit: int, run_id: str, at: datetime
    ) -> list[ForgetCount]:
        """Forget up to ``limit`` of the held records in one transaction: the records with
        their text-index entries and vectors, their text in the audit, their evidence fenced
        from replay, a ``FORGET`` audit row each. What went, per owner and rule; nothing
        when none are left."""
        ...

    def expired_among(self, source: str, hits: Sequence[Hit], expiry: Expiry) -> set[str]:
        """The ids of ``hits`` that ``expiry`` expires."""
        ...

    def forgotten_memories(self) -> set[tuple[str, str]]:
        """(memory type, id) of every memory a FORGET audit row names, in any run."""
        ...


class FileLog(Protocol):
    """The files and folders mempipe wrote that hold users' text (audit, rejects, bundles)."""

    def record_file(self, file: WrittenFile) -> None:
        """Record (or renew) one path; recording it twice keeps one entry."""
        ...

    def written_files(self) -> list[WrittenFile]: ...

    def store_id(self) -> str:
        """The store's own id, which the files it writes carry (the audit's metadata)."""
        ...


class ProviderBatches(Protocol):
    """What runs submitted to a provider's Batch API, recorded before anything else is done
    with it."""

    def record_batch(self, batch: ProviderBatch) -> None:
        """Record a batch, or its new state (by its key)."""
        ...

    def open_batches(self, job: str, scope: str) -> list[ProviderBatch]:
        """Batches of any run whose requests may still be answered, oldest first."""
        ...

    def run_batches(self, run_id: str) -> list[ProviderBatch]: ...


class Store(
    Turns,
    WorkQueue,
    Memories,
    AuditLog,
    Vectors,
    Registry,
    Search,
    IndexAdmin,
    RunLog,
    Leases,
    Schema,
    Transfer,
    Erasure,
    Retention,
    FileLog,
    ProviderBatches,
    Protocol,
):
    """Every role: what a backend implements, and what jobs that move whole stores take."""
