"""Import a mempipe bundle into any store, verbatim: ids, versions, times, evidence and audit
kept; what the store already holds is skipped, a record held with other content is a reject
(never overwritten); at the end the store's digests are compared with the manifest's.

Nothing is written until the whole bundle is checked (:func:`verify_bundle`): every file read
to its end, its records counted and digested as the export did, and held against the manifest,
its vector files against the registry the manifest names. A file that cannot be read, or that
differs from its manifest (damaged, edited, truncated), refuses the import, naming the file."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ValidationError

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.domain.digest import Digest, canonical, millis
from mempipe.errors import ArchiveError, ConfigError
from mempipe.progress import track
from mempipe.rejects import append_rejects
from mempipe.schemas.arrow import from_arrow_rows
from mempipe.schemas.audit import AuditRow, AuditSelection
from mempipe.schemas.bundle import (
    BUNDLE_FORMAT,
    BUNDLE_MODELS,
    NOT_DIGESTED,
    BundleImportSummary,
    BundleSelection,
    Manifest,
    store_collection,
)
from mempipe.schemas.errors import describe
from mempipe.schemas.failure import Failure
from mempipe.schemas.memory import MEMORY_COLLECTIONS, MemoryRecord
from mempipe.schemas.reject import Reject
from mempipe.schemas.summaries import Owner, UserCount
from mempipe.services.bundle_vectors import read_vectors, reusable, set_vectors
from mempipe.services.export import MANIFEST, digest_collection, records


def read_manifest(path: Path) -> Manifest:
    try:
        manifest = Manifest.model_validate_json((path / MANIFEST).read_bytes())
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: not a mempipe bundle (no {MANIFEST})") from exc
    except (OSError, ValidationError) as exc:
        raise ArchiveError(f"{path / MANIFEST}: not a bundle's manifest ({_why(exc)})") from exc
    if manifest.bundle_format > BUNDLE_FORMAT:
        raise ConfigError(
            f"{path}: bundle format {manifest.bundle_format}; this mempipe reads up to "
            f"{BUNDLE_FORMAT}: upgrade mempipe"
        )
    return manifest


def check_custom_types(uow: UnitOfWork, custom_types: Sequence[str]) -> None:
    """Refused before anything is written: custom types the target has not declared (their
    memories would have no declared shape there)."""
    missing = sorted(set(custom_types) - set(uow.schema.custom_types))
    if missing:
        raise ConfigError(
            f"the source holds custom types the target has not declared: {', '.join(missing)}; "
            "declare them in the target's project-config.yaml first"
        )


def checked_bundle(path: Path, batch_size: int = 2000) -> Manifest:
    """The bundle's manifest, once every file of the bundle is as it describes: else an
    :class:`ArchiveError` naming the file that is not. Reads every file once, writes nothing."""
    manifest = read_manifest(path)
    verify_bundle(path, manifest, batch_size)
    return manifest


def verify_bundle(path: Path, manifest: Manifest, batch_size: int) -> None:
    for collection, model in BUNDLE_MODELS.items():
        file = path / f"{collection}.parquet"
        digest = Digest()
        try:
            for batch, _ in _batches(file, model, batch_size):
                for record in batch:
                    digest.add(record, NOT_DIGESTED.get(collection, ()))
        except (OSError, pa.ArrowException, ValidationError, ValueError) as exc:
            raise _refused(file, f"it cannot be read: {_why(exc)}") from exc
        if digest.count != manifest.counts.get(collection):
            said = manifest.counts.get(collection)
            raise _refused(file, f"it holds {digest.count} records, its manifest says {said}")
        if digest.hexdigest() != manifest.digests.get(collection):
            raise _refused(file, "its records differ from the digest its manifest holds")
    entries = {(e.collection, e.model_id): e for e in manifest.registry}
    for collection, model_id in manifest.vectors.items():
        file = path / f"vectors-{collection}.parquet"
        entry = entries.get((store_collection(collection), model_id))
        if entry is None:
            raise _refused(
                path / MANIFEST, f"it names {file.name} of {model_id}, which its registry lacks"
            )
        try:
            for page in read_vectors(file, batch_size):
                wrong = next((len(v) for _, v in page if len(v) != entry.dimensions), None)
                if wrong is not None:
                    raise _refused(
                        file, f"a vector of {wrong} dimensions; {model_id} gives {entry.dimensions}"
                    )
        except (OSError, pa.ArrowException, KeyError, ValueError) as exc:
            raise _refused(file, f"it cannot be read: {_why(exc)}") from exc


def _refused(file: Path, why: str) -> ArchiveError:
    return ArchiveError(
        f"{file}: the bundle differs from its manifest: {why}; nothing was imported"
    )


def _why(exc: BaseException) -> str:
    return (describe(exc) if isinstance(exc, ValidationError) else str(exc)).splitlines()[0]


def import_bundle(
    uow: UnitOfWork,
    path: Path,
    *,
    run_id: str,
    rejects_file: Path,
    batch_size: int = 2000,
    checked: Manifest | None = None,
) -> BundleImportSummary:
    """``checked``: the manifest :func:`checked_bundle` returned for ``path`` (a flow checks
    the bundle before it records its run); else the bundle is checked here first."""
    started = time.perf_counter()
    manifest = checked or checked_bundle(path, batch_size)
    check_custom_types(uow, manifest.custom_types)
    written: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    conflicts = 0
    held = HeldRows(uow)
    bundle_runs: set[str] = set()
    owners: Counter[Owner] = Counter()
    with track("import", sum(manifest.counts.values()), "records") as progress:
        done = 0
        for collection, model in BUNDLE_MODELS.items():
            for batch, first_index in _batches(path / f"{collection}.parquet", model, batch_size):
                if collection == "runs":
                    bundle_runs.update(r.run_id for r in batch)
                if collection == "turns" or collection in MEMORY_COLLECTIONS:
                    owners.update((r.org_id, r.project_id, r.user_id) for r in batch)
                added, rejects = write_records(uow, collection, batch, run_id, held)
                written[collection] += added
                skipped[collection] += len(batch) - added - len(rejects)
                conflicts += append_rejects(
                    rejects_file,
                    [
                        r.model_copy(
                            update={
                                "path": str(path / f"{collection}.parquet"),
                                "index": first_index + (r.index or 0),
                            }
                        )
                        for r in rejects
                    ],
                )
                done += len(batch)
                progress.update(done)
    reused = _vectors(uow, path, manifest, batch_size)
    differences = _digest_differences(uow, manifest, bundle_runs, batch_size)
    return BundleImportSummary(
        run_id=run_id,
        source=str(path),
        written=dict(written),
        duplicates_skipped=dict(skipped),
        conflicts=conflicts,
        rejects_path=str(rejects_file) if conflicts else None,
        vectors_reused=reused,
        without_vector=max(0, sum(written[c] for c in MEMORY_COLLECTIONS) - reused),
        digests_match=not differences,
        digest_differences=differences,
        users=UserCount.of(owners),
        seconds=round(time.perf_counter() - started, 3),
    )


def _vectors(uow: UnitOfWork, path: Path, manifest: Manifest, batch_size: int) -> int:
    """The bundle's vectors set where the target can serve them (:func:`reusable`)."""
    entries = {(e.collection, e.model_id): e for e in manifest.registry}
    reused = 0
    for collection, model_id in manifest.vectors.items():
        if not reusable(uow, collection, entries[(store_collection(collection), model_id)]):
            continue
        for page in read_vectors(path / f"vectors-{collection}.parquet", batch_size):
            reused += set_vectors(uow, collection, model_id, page)
    return reused


def _digest_differences(
    uow: UnitOfWork, manifest: Manifest, bundle_runs: set[str], batch_size: int
) -> list[str]:
    """Each collection whose digest in the store, for the bundle's selection, is not the
    bundle's (runs: the bundle's runs only, not the store's own, such as this import's)."""
    differences = []
    for collection in BUNDLE_MODELS:
        held = digest_collection(
            uow, collection, manifest.selection, batch_size, runs=bundle_runs
        ).hexdigest()
        if held != manifest.digests.get(collection):
            differences.append(
                f"{collection}: {held} in the store, {manifest.digests.get(collection)} in the "
                "bundle"
            )
    return differences


def _batches(
    path: Path, model: type[BaseModel], size: int
) -> Iterator[tuple[list[BaseModel], int]]:
    index = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=size):
        rows = from_arrow_rows(batch.to_pylist(), model)
        yield rows, index
        index += len(rows)


class HeldRows:
    """Audit rows and failures have no id: what the target already holds of them is known by
    their natural key (run, memory, version, action, time; run, step, snapshot, handler,
    time), read once per run (audit) or once per import (failures), so that an import or copy
    run again, or after a kill, writes each of them once."""

    def __init__(self, uow: UnitOfWork) -> None:
        self._uow = uow
        self._audit: dict[str, set[tuple]] = {}
        self._failures: set[tuple] | None = None

    def new(self, collection: str, batch: list) -> list:
        if collection == "audit":
            for run in {row.run_id for row in batch} - set(self._audit):
                self._audit[run] = {
                    _audit_key(r) for r in self._uow.audit.audit_rows(AuditSelection(run_id=run))
                }
            fresh = [r for r in batch if _audit_key(r) not in self._audit[r.run_id]]
            for row in fresh:
                self._audit[row.run_id].add(_audit_key(row))
            return fresh
        if self._failures is None:
            self._failures = {
                _failure_key(f) for f in records(self._uow, "failures", BundleSelection())
            }
        fresh = [f for f in batch if _failure_key(f) not in self._failures]
        self._failures.update(_failure_key(f) for f in fresh)
        return fresh


def _audit_key(row: AuditRow) -> tuple:
    return (row.run_id, row.memory_id, row.version, row.action.value, millis(row.at))


def _failure_key(failure: Failure) -> tuple:
    return (failure.run_id, failure.step, failure.snapshot_id, failure.handler, millis(failure.at))


def write_records(
    uow: UnitOfWork,
    collection: str,
    batch: list,
    run_id: str,
    held: HeldRows,
    then: Callable[[], None] = lambda: None,
) -> tuple[int, list[Reject]]:
    """Write a batch of one collection's records as they are; returns how many were written,
    and the rejects (``index`` within the batch). ``then`` runs after the batch, in the same
    transaction where the batch has one: a copy's checkpoint."""
    if collection == "runs":
        added = uow.transfer.add_runs(batch)
        then()
        return len(added), []
    if collection == "turns":
        result = uow.turns.add_turns(batch, run_id)
        then()
        return result.inserted, result.conflicts
    if collection == "snapshots":
        created = uow.turns.add_snapshots(batch)
        then()
        return len(created), []
    with uow.transaction():
        if collection in MEMORY_COLLECTIONS:
            written = _write_memories(uow, collection, batch)
        else:
            fresh = held.new(collection, batch)
            if collection == "audit":
                uow.audit.add_audit(fresh)
            else:
                for failure in fresh:
                    uow.audit.add_failure(failure)
            written = len(fresh), []
        then()
    return written


def _write_memories(
    uow: UnitOfWork, collection: str, batch: list[MemoryRecord]
) -> tuple[int, list[Reject]]:
    """A memory id already held is a duplicate when its content is the same, a conflict when
    not. Memories arrive without vectors: ``mempipe reembed --incremental`` embeds them with
    the target's serving model; until then text and hybrid search find them."""
    leave_out = NOT_DIGESTED[collection]
    added, rejects = 0, []
    for index, record in enumerate(batch):
        held = uow.memories.get_memory(collection, record.id)
        if held is None:
            bare = record.model_copy(update={"has_embedding": False, "embedding_model_id": None})
            added += uow.memories.add_memory(collection, bare, None)
            continue
        stored = type(record).model_validate({k: v for k, v in held.items() if v is not None})
        if canonical(stored, leave_out) != canonical(record, leave_out):
            rejects.append(
                Reject(
                    path="",
                    index=index,
                    reason=f"{collection} {record.id} is held with other content: kept",
                    raw=record.model_dump_json(),
                )
            )
    return added, rejects
