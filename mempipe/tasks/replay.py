"""Tasks of the replay flow."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from mempipe.adapters.embedding import embedder_for
from mempipe.adapters.llm.batches import OpenAIBatches
from mempipe.adapters.llm.openai_compat import CHAT_ENDPOINT, OpenAIExtractor
from mempipe.adapters.llm.registry import extractor_for
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.bootstrap import given_store
from mempipe.domain.partitioning import partition
from mempipe.errors import ConfigError
from mempipe.interrupts import interruptible_sleep, stop_requested
from mempipe.progress import track
from mempipe.schemas.audit import AuditSelection, AuditTime
from mempipe.schemas.replay import ReplaySettings
from mempipe.schemas.run import FileKind
from mempipe.schemas.selection import SnapshotSelection
from mempipe.schemas.work import WorkItem
from mempipe.services.audit import EXPORTED, export_earlier_runs, write_audit, write_observed
from mempipe.services.owner_work import replay_by_owner
from mempipe.services.provider_batches import BatchWork
from mempipe.services.replay import ReplayContext, memory_embedding_model
from mempipe.services.replay_batch import (
    apply_replay_batches,
    extraction_key,
    extraction_requests,
    replay_scope,
)
from mempipe.services.replay_summary import BucketOutcome
from mempipe.services.written_files import record_written
from mempipe.settings import load_batch_limits
from mempipe.tasks.policies import retry_if_transient

FAILURES_LOGGED = 10
"""A bucket logs its first failures one by one, then their count: a dead provider fails every
extraction the same way, and 100,000 lines of it help nobody."""


def replay_context(settings: ReplaySettings, run_id: str, uow: UnitOfWork) -> ReplayContext:
    """The extractor, embedder and rules a replay (or a memory import) runs with, made in the
    process that runs it. New memories are embedded with the model that serves the store's
    memories (a re-embed moved it), else with the configured one: any other vector could not
    be searched. A configuration left behind by a re-embed is said, not refused."""
    model = memory_embedding_model(uow, settings.embedding_model)
    if model != settings.embedding_model:
        get_run_logger().warning(
            "the store's memories are served by %s (a re-embed moved them); the configuration "
            "names %s: new memories are embedded with %s",
            model,
            settings.embedding_model,
            model,
        )
    return ReplayContext(
        run_id=run_id,
        extractor=extractor_for(settings.extractor, settings.llm),
        embedder=embedder_for(model),
        thresholds=settings.thresholds,
        retry=settings.retry,
        sleep=interruptible_sleep,
    )


@task(name="select-extraction-work", cache_policy=NO_CACHE)
@given_store()
def select_extraction_work(
    uow: UnitOfWork, selection: SnapshotSelection, handlers: list[str], force: bool, buckets: int
) -> list[list[WorkItem]]:
    """The work partitioned into at most ``buckets`` lists (see :func:`partition`)."""
    items = uow.work.extraction_work(selection, handlers, force=force)
    parts = partition(items, buckets)
    get_run_logger().info("%d extractions in %d partition(s)", len(items), len(parts))
    return parts


@task(
    name="replay-bucket",
    cache_policy=NO_CACHE,
    retries=2,
    retry_delay_seconds=[5, 30],
    retry_condition_fn=retry_if_transient,
)
@given_store()
def replay_bucket(
    uow: UnitOfWork,
    items: list[WorkItem],
    settings: ReplaySettings,
    run_id: str,
    force: bool,
    selection: SnapshotSelection,
    handlers: list[str],
    part: str = "1/1",
) -> BucketOutcome:
    """Replays the partition owner by owner (:mod:`mempipe.services.owner_work`): when it
    returns, every owner it was given has been replayed, by this run or another. ``part``:
    which of the run's partitions this is, for its bar (each counts its own extractions)."""
    label = "replay" if part == "1/1" else f"replay part {part}"
    with track(label, len(items), "extractions") as bar:
        context = replay_context(settings, run_id, uow)
        outcome = replay_by_owner(
            uow, items, context, selection, handlers, force=force, progress=bar.update
        )
    results, elsewhere = outcome.results, outcome.done_elsewhere
    failed = [r for r in results if r.failure_class is not None]
    logger = get_run_logger()
    logger.info(
        "%d extractions done, %d failed, %d done by another replay meanwhile",
        len(results) - len(failed),
        len(failed),
        elsewhere,
    )
    for failure in failed[:FAILURES_LOGGED]:
        logger.warning(
            "%s/%s failed (%s): %s",
            failure.snapshot_id,
            failure.handler,
            failure.failure_class,
            failure.error,
        )
    if len(failed) > FAILURES_LOGGED:
        logger.warning(
            "and %d more failed extraction(s): `mempipe report --run-id %s` lists them all",
            len(failed) - FAILURES_LOGGED,
            run_id,
        )
    return outcome


@task(name="replay-via-batch", cache_policy=NO_CACHE, retry_condition_fn=retry_if_transient)
@given_store()
def replay_via_batch(
    uow: UnitOfWork,
    selection: SnapshotSelection,
    handlers: list[str],
    settings: ReplaySettings,
    run_id: str,
    force: bool,
) -> list[BucketOutcome]:
    """The open batches an earlier run of the same scope left first, then the selected work
    they did not cover, through the provider's Batch API."""
    context = replay_context(settings, run_id, uow)
    live = context.extractor
    if not isinstance(live, OpenAIExtractor):
        raise ConfigError(f"--via batch needs an OpenAI-compatible extractor, not {live.name}")
    work = BatchWork(
        uow,
        OpenAIBatches(settings.llm),
        run_id=run_id,
        job="replay",
        scope=replay_scope(settings.llm.model, force),
        endpoint=CHAT_ENDPOINT,
        limits=load_batch_limits(),
        retry=settings.retry,
        sleep=interruptible_sleep,
    )
    adopted = work.adopt()
    outcomes = apply_replay_batches(uow, work, adopted, live, context, force=force)
    if not stop_requested():
        covered = {key for batch in adopted for key in batch.items}
        items = [
            item
            for item in uow.work.extraction_work(selection, handlers, force=force)
            if extraction_key(item.handler, item.snapshot_id) not in covered
        ]
        submitted = work.submit(extraction_requests(uow, items, live))
        outcomes += apply_replay_batches(uow, work, submitted, live, context, force=force)
    get_run_logger().info(
        "%d batch(es) applied (%d adopted from an earlier run)", len(outcomes), len(adopted)
    )
    return outcomes


@task(name="export-audit", cache_policy=NO_CACHE)
@given_store()
def export_audit(
    uow: UnitOfWork,
    out_dir: str,
    run_id: str | None = None,
    since: str | None = None,
    until: str | None = None,
    by: AuditTime = AuditTime.APPLIED,
    mark_exported: bool = False,
) -> list[str]:
    """``mark_exported``: the run's own export (replay's) marks it, so that no later replay
    exports it again (a report only reads the audit)."""
    if by is AuditTime.OBSERVED:
        files = write_observed(uow, Path(out_dir), since, until)
    else:
        files = write_audit(
            uow.audit.audit_rows(AuditSelection(run_id=run_id, since=since, until=until)),
            Path(out_dir),
            uow.files.store_id(),
        )
    if mark_exported and run_id is not None:
        uow.runs.set_checkpoint(run_id, EXPORTED, True)
    if files:
        record_written(uow, out_dir, FileKind.AUDIT, run_id, None)
    return [str(f) for f in files]


@task(name="export-earlier-audit", cache_policy=NO_CACHE)
@given_store()
def export_earlier_audit(uow: UnitOfWork, out_dir: str, current: str) -> list[str]:
    """The audit of earlier runs that never reached Parquet (killed ones), exported once."""
    runs = export_earlier_runs(uow, Path(out_dir), current=current)
    if runs:
        record_written(uow, out_dir, FileKind.AUDIT, current, None)
    if runs:
        get_run_logger().info("exported the audit of %d earlier run(s): %s", len(runs), runs)
    return runs
