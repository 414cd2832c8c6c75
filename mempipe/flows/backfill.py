"""Backfill: stream transcript archives into turns, then promote sessions into snapshots.

Idempotent: running the same backfill again inserts nothing and counts the skips. The files are
read in this process, or cut into ``partitions`` groups of files read at once on threads or on
Dask workers (``task_runner="dask"``: a local cluster of ``partitions`` processes, or the
scheduler at ``dask_address``); the sessions are promoted once every file is in, so a session
whose files two workers read is cut as one. A turn
time before 1970 or more than ``future_margin`` after the run is a reject, unless
``allow_any_time``. ``embed``: the new turns get vectors of the serving model in the same
run (the incremental re-embed of the turns, as a subflow)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import Field

from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.archives import expand_paths
from mempipe.archives.registry import FormatName
from mempipe.bootstrap import AppContext, load_context
from mempipe.domain.run_outcome import unread_files
from mempipe.errors import IncompleteRunError, StoreError
from mempipe.flows.hooks import job_flow
from mempipe.flows.job import Job
from mempipe.flows.recorded_run import concluded, recorded_run
from mempipe.interrupts import handle_stop_signals, stop_requested
from mempipe.rejects import rejects_path
from mempipe.scaleout import Spread, TaskRunnerName
from mempipe.schemas.archive import FUTURE_MARGIN, ArchiveFormat, Reading, TimeWindow
from mempipe.schemas.costs import CostConfig, RunPlan
from mempipe.schemas.identity import IdentityDefaults, IdentityPolicy
from mempipe.schemas.reembed import ReembedSummary
from mempipe.schemas.run import FileKind
from mempipe.schemas.summaries import BackfillSummary, IngestTotals, PromotionSummary
from mempipe.services.backfill.summary import (
    artifact_rows,
    run_counts,
    summarize_backfill,
)
from mempipe.settings import load_llm_settings
from mempipe.tasks import backfill as tasks
from mempipe.tasks.archives import resolve_archives
from mempipe.tasks.artifacts import publish_table
from mempipe.tasks.promote import promote_sessions


class Backfill(Job[BackfillSummary]):
    """The request of ``mempipe backfill``: the options of the command, the parameters of
    :func:`backfill_flow`."""

    creates_store: ClassVar[bool] = True

    paths: Annotated[list[str], Field(min_length=1)]
    format: FormatName = ArchiveFormat.AUTO
    org_id: str | None = None
    project_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    identity: IdentityPolicy = IdentityPolicy.STRICT
    columns: dict[str, str] | None = None
    batch_size: Annotated[int, Field(ge=1, le=100_000)] = 5000
    rejects_dir: str = "mempipe-rejects"
    promote_sessions: bool = True
    future_margin: timedelta = FUTURE_MARGIN
    allow_any_time: bool = False
    embed: bool = False
    partitions: Annotated[int, Field(ge=1, le=256)] = 1
    task_runner: TaskRunnerName = TaskRunnerName.THREADS
    dask_address: str | None = None

    def check(self, context: AppContext) -> None:
        expand_paths(self.paths)

    def plan(self, context: AppContext) -> RunPlan:
        """What ``--embed`` would send; a store not there yet embeds with the configured
        model (and is not created)."""
        from mempipe.services.backfill.plan import archive_texts, backfill_plan

        defaults = context.identity_defaults(
            self.org_id, self.project_id, self.user_id, self.agent_id, self.identity
        )
        texts = archive_texts(expand_paths(self.paths), self.format, defaults, self.columns or {})
        model = context.config.memory.embedding.model
        try:
            return _plan(context.store_url, texts, model, context.config.costs)
        except StoreError:
            return backfill_plan(
                None, context.store_url, texts, model, context.config.costs, load_llm_settings()
            )

    def reading(self, defaults: IdentityDefaults, run_id: str, rejects_file: Path) -> Reading:
        """How the run reads every file: this request's format, batch, columns and plausible
        times (from now), with what the run settled (the identity, its id, its rejects file)."""
        now = datetime.now(UTC)
        times = None if self.allow_any_time else TimeWindow.around(now, self.future_margin)
        return Reading(
            format=self.format,
            defaults=defaults,
            run_id=run_id,
            rejects_file=rejects_file,
            batch_size=self.batch_size,
            columns=self.columns or {},
            times=times,
        )

    @property
    def spread(self) -> Spread:
        """Where the groups of files are read: this process, threads, or Dask workers."""
        return Spread(
            task_runner=self.task_runner, workers=self.partitions, dask_address=self.dask_address
        )

    def run(self, context: AppContext) -> BackfillSummary:
        return backfill_flow(**self.model_dump(), **context.flow_options())


def _plan(store_url: str, texts: Iterator[str], model: str, costs: CostConfig) -> RunPlan:
    with unit_of_work(store_url, read_only=True, existing=True) as uow:
        from mempipe.services.backfill.plan import backfill_plan

        return backfill_plan(uow, uow.url, texts, model, costs, load_llm_settings())


@job_flow("backfill")
def backfill_flow(
    paths: Annotated[list[str], Field(min_length=1)],
    format: FormatName = ArchiveFormat.AUTO,
    org_id: str | None = None,
    project_id: str | None = None,
    user_id: str | None = None,
    agent_id: str | None = None,
    identity: IdentityPolicy = IdentityPolicy.STRICT,
    columns: dict[str, str] | None = None,
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
    batch_size: Annotated[int, Field(ge=1, le=100_000)] = 5000,
    rejects_dir: str = "mempipe-rejects",
    promote_sessions: bool = True,
    future_margin: timedelta = FUTURE_MARGIN,
    allow_any_time: bool = False,
    embed: bool = False,
    partitions: Annotated[int, Field(ge=1, le=256)] = 1,
    task_runner: TaskRunnerName = TaskRunnerName.THREADS,
    dask_address: str | None = None,
) -> BackfillSummary:
    """Load the archives as turns, then promote their sessions (the module's notes)."""
    started = time.monotonic()
    handle_stop_signals()
    context = load_context(store, config, store_secret)
    defaults = context.identity_defaults(org_id, project_id, user_id, agent_id, identity)
    asked = {"paths": paths, "format": str(format), **defaults.recorded()}
    with recorded_run(context, "backfill", asked, creates_store=True) as run:
        rejects_file = rejects_path(rejects_dir, run.run_id)
        run.record_file(rejects_file, FileKind.REJECTS, defaults.user_id)
        request = Backfill.of_run()
        reading = request.reading(defaults, run.run_id, rejects_file)
        ingested = _ingest(context.store_url, paths, reading, request.spread)
        summary, failed = _after_ingest(context, run.run_id, ingested, reading, request)
        summary.seconds = round(time.monotonic() - started, 3)
        run.end(run_counts(summary), failed)
    _publish(summary)
    return concluded(summary, "backfill", failed)


def _ingest(
    store_url: str, paths: list[str], reading: Reading, spread: Spread
) -> list[IngestTotals]:
    """Every archive file the paths name, read in groups (one task each): one after another in
    this process, or spread over the workers."""
    groups = resolve_archives(paths, spread.workers)
    if spread.task_runner is TaskRunnerName.THREADS and spread.workers == 1:
        return [tasks.ingest_archives(store_url, group, reading) for group in groups]
    parts = [{"store_url": store_url, "paths": group, "reading": reading} for group in groups]
    return spread.run(tasks.ingest_archives, parts)


def _after_ingest(
    context: AppContext,
    run_id: str,
    ingested: list[IngestTotals],
    reading: Reading,
    request: Backfill,
) -> tuple[BackfillSummary, str | None]:
    """Promote the sessions and embed the new turns (unless stopped), and sum the run up with
    what it left undone: the files it could not read, the turns it could not embed."""
    store_url, memory = context.store_url, context.config.memory
    handlers = [t.value for t in memory.extraction.enabled]
    promotion = (
        promote_sessions(store_url, memory.promotion, handlers, run_id)
        if request.promote_sessions and not stop_requested()
        else PromotionSummary()
    )
    embedded, not_embedded = (None, None)
    if request.embed and not stop_requested():
        embedded, not_embedded = _embed_turns(store_url, str(context.settings.config))
    summary = summarize_backfill(run_id, store_url, ingested, promotion, reading.rejects_file, 0.0)
    if isinstance(embedded, ReembedSummary):
        (turns,) = embedded.collections
        summary.embedded, summary.embedding_model = turns.embedded_now, turns.model_id
    reasons = {f.path: f.failed for f in summary.files if f.failed}
    failed_files = [(path, reasons.get(path)) for path in summary.failed_files]
    unread = unread_files(failed_files, summary.rejects_path)
    return summary, "; ".join(f for f in (unread, not_embedded) if f) or None


def _publish(summary: BackfillSummary) -> None:
    publish_table(
        "backfill-summary",
        artifact_rows(summary),
        f"backfill {summary.run_id}: {summary.turns_inserted} turns inserted, "
        f"{summary.duplicates_skipped} skipped, {summary.rejected} rejected, "
        f"{summary.snapshots_created} snapshots",
    )


def _embed_turns(store_url: str, config: str | None) -> tuple[object, str | None]:
    """The new turns' vectors, by the incremental re-embed of the turns (a subflow): its
    summary, and what it left undone. Imported here: a backfill without ``--embed`` does not
    pay for loading the re-embed flow and its numerical stack."""
    from mempipe.flows.reembed import reembed_flow

    try:
        return reembed_flow(
            collections=["stm"], incremental=True, store=store_url, config=config
        ), None
    except IncompleteRunError as exc:  # the turns are in; their vectors are not all there
        return exc.summary, f"embedding the turns: {exc}"
