"""Replay extraction: run the enabled handlers over selected snapshots, reconcile, audit.

Resumable: a run killed and started again finishes the rest and redoes nothing done.
The work is cut into ``concurrency`` partitions (by project, then owner-id ranges) run on
threads, or on Dask workers with ``task_runner="dask"`` (a local cluster of
``concurrency`` processes, or the scheduler at ``dask_address``).

``via="batch"`` sends the extractions through the provider's Batch API instead (the
``openai`` extractor; ``concurrency`` and the task runner do not apply): the batches are
applied in the order they were submitted, each owner's history in time order
(:mod:`mempipe.services.replay.provider_batch`)."""

from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import BaseModel, Field, field_validator

from mempipe.adapters.llm.openai_compat import describing_only
from mempipe.adapters.llm.registry import ExtractorName, extractor_for
from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.bootstrap import AppContext, load_context
from mempipe.domain.run_outcome import extractions_left, preview_left
from mempipe.errors import ConfigError, IncompleteRunError
from mempipe.flows.hooks import job_flow
from mempipe.flows.job import Job, comma_list
from mempipe.flows.recorded_run import concluded, recorded_run
from mempipe.interrupts import handle_stop_signals
from mempipe.scaleout import Spread, TaskRunnerName
from mempipe.schemas.costs import CostConfig, RunPlan, Via
from mempipe.schemas.memory import MemoryType
from mempipe.schemas.replay import ReplayPreview, ReplaySettings, ReplaySummary
from mempipe.schemas.selection import SnapshotSelection
from mempipe.schemas.work import Stale, WorkQuery
from mempipe.services.replay.extract import current_extraction
from mempipe.services.replay.preview import batch_preview
from mempipe.services.replay.summary import BucketOutcome, summarize_replay
from mempipe.settings import load_batch_limits
from mempipe.tasks.artifacts import publish_table
from mempipe.tasks.extraction import extraction_context
from mempipe.tasks.replay import (
    replay_bucket,
    replay_via_batch,
    select_extraction_work,
)
from mempipe.tasks.report import export_audit, export_earlier_audit
from mempipe.tasks.runs import recover_dead_runs

PREVIEWING = {"sample", "seed", "preview", "html"}
"""The request's fields that choose what is previewed or replayed, not the flow's parameters."""

COUNTS = {
    "snapshots",
    "extractions",
    "pending",
    "summaries",
    "done",
    "failed_retryable",
    "failed_content",
    "memories_extracted",
    "added",
    "updated",
    "reinforced",
    "unembedded",
    "done_elsewhere",
    "erased_meanwhile",
}
"""The counts recorded with the run and published as its table artifact."""


class Replay(Job[ReplaySummary], SnapshotSelection):
    """The request of ``mempipe replay``: the options of the command (its selection's first),
    the parameters of :func:`replay_flow`."""

    command_only: ClassVar[frozenset[str]] = frozenset(PREVIEWING)

    handlers: list[MemoryType] | None = None
    extractor: ExtractorName = "offline"
    concurrency: Annotated[int, Field(ge=1, le=64)] = 4
    task_runner: TaskRunnerName = TaskRunnerName.THREADS
    dask_address: str | None = None
    force: bool = False
    stale: bool = False
    audit_dir: str = "audit"
    via: Via = "live"
    sample: int | None = Field(default=None, ge=1)
    seed: int = 0
    preview: bool = False
    html: bool = False

    @field_validator("handlers", "snapshot_ids", mode="before")
    @classmethod
    def _listed(cls, value: object) -> object:
        return (list(value) or None) if isinstance(value, tuple) else comma_list(value)

    @property
    def selection(self) -> SnapshotSelection:
        return SnapshotSelection.model_validate(
            self.model_dump(include=set(SnapshotSelection.model_fields))
        )

    def plan(self, context: AppContext) -> RunPlan:
        request = self.sampled(context)
        settings = context.replay_settings(self.extractor)
        stale = _stale(settings, self.enabled(context), self.stale, self.force)
        return _plan(
            context.store_url, request, self.enabled(context), settings, context.config.costs, stale
        )

    def run(self, context: AppContext) -> ReplaySummary:
        request = self.sampled(context)
        return replay_flow(**request.model_dump(exclude=PREVIEWING), **context.flow_options())

    def enabled(self, context: AppContext) -> list[str]:
        return [t.value for t in (self.handlers or context.config.memory.extraction.enabled)]

    def sampled(self, context: AppContext) -> Replay:
        """With ``sample``, the request narrowed to that many of its snapshots, drawn with
        ``seed``: the same ones for a preview and the replay after it (a preview writes
        nothing)."""
        if self.sample is None:
            return self
        drawn = _sample(context.store_url, self.selection, self.enabled(context), self)
        return self.model_copy(update={"snapshot_ids": drawn, "sample": None})

    def previewed(self, context: AppContext) -> ReplayPreview:
        """What a replay of the (sampled) selection would do, written nowhere; with ``--via
        batch``, whose answers come within a day, the plan alone."""
        settings = context.replay_settings(self.extractor, asking=True)
        request, handlers = self.sampled(context), self.enabled(context)
        stale = _stale(settings, handlers, self.stale, self.force)
        plans = request.plan(context), self.model_copy(update={"sample": None}).plan(context)
        if self.via == "batch":
            return batch_preview(context.store_url, request, settings, handlers, plans)
        _require_reconcilable(context.store_url, handlers)
        kept = context.kept_answers if self.html else None
        found = _preview(context.store_url, request, handlers, settings, stale, plans, kept)
        undone = preview_left(found)
        if undone:  # the preview's failures fail it, as a replay's fail the replay
            raise IncompleteRunError(undone, found)
        return found


def _plan(
    store_url: str,
    request: Replay,
    handlers: list[str],
    settings: ReplaySettings,
    costs: CostConfig,
    stale: Stale | None,
) -> RunPlan:
    with unit_of_work(store_url, read_only=True, existing=True) as uow:
        from mempipe.services.replay.plan import replay_plan

        with describing_only():  # a plan sends nothing: its extractor needs no key
            extractor = extractor_for(request.extractor, settings.llm)
        return replay_plan(
            uow,
            request.selection,
            handlers,
            force=request.force,
            stale=stale,
            extractor=request.extractor,
            summaries=extractor.capabilities.summaries,
            via=request.via,
            costs=costs,
            llm=settings.llm,
            limits=load_batch_limits(),
        )


def _sample(
    store_url: str, selection: SnapshotSelection, handlers: list[str], request: Replay
) -> list[str]:
    with unit_of_work(store_url, read_only=True, existing=True) as uow:
        from mempipe.services.replay.preview import sample_snapshots

        return sample_snapshots(uow, selection, handlers, request.sample or 0, request.seed)


def _preview(
    store_url: str,
    request: Replay,
    handlers: list[str],
    settings: ReplaySettings,
    stale: Stale | None,
    plans: tuple[RunPlan, RunPlan],
    page: Path | None,
) -> ReplayPreview:
    with unit_of_work(store_url, existing=True) as uow:
        from mempipe.services.replay.preview import preview

        query = WorkQuery(
            handlers=handlers, selection=request.selection, force=request.force, stale=stale
        )
        work = uow.work.extraction_work(query)
        context = extraction_context(settings, f"preview-{uuid.uuid4().hex[:12]}", uow, keep=True)
        return preview(uow, work, context, handlers, plans, page)


@job_flow("replay")
def replay_flow(
    org_id: str | None = None,
    project_id: str | None = None,
    user_id: str | None = None,
    session_id: str | None = None,
    snapshot_ids: list[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    handlers: list[MemoryType] | None = None,
    extractor: ExtractorName = "offline",
    via: Via = "live",
    concurrency: Annotated[int, Field(ge=1, le=64)] = 4,
    task_runner: TaskRunnerName = TaskRunnerName.THREADS,
    dask_address: str | None = None,
    force: bool = False,
    stale: bool = False,
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
    audit_dir: str = "audit",
) -> ReplaySummary:
    """Extract, reconcile and audit the selected snapshots (the module's notes say how)."""
    handle_stop_signals()
    context = load_context(store, config, store_secret)
    store_url, selection = context.store_url, Replay.of_run().selection
    enabled = [t.value for t in (handlers or context.config.memory.extraction.enabled)]
    work = _work(context, selection, enabled, extractor, via, force, stale)
    asked = _asked(selection, enabled, extractor, force, stale, via, audit_dir)
    with recorded_run(context, "replay", asked, alive=True) as run:
        recover_dead_runs(store_url)
        spread = Spread(task_runner=task_runner, workers=concurrency, dask_address=dask_address)
        outcomes = _extract(store_url, run.run_id, work, via, spread)
        files = export_audit(store_url, audit_dir, run_id=run.run_id, mark_exported=True)
        export_earlier_audit(store_url, audit_dir, run.run_id)
        summary = summarize_replay(run.run_id, store_url, work.settings, outcomes, audit_dir, files)
        failed = extractions_left(summary)
        run.end(summary.model_dump(include=COUNTS), failed)
    _publish(summary)
    return concluded(summary, "replay", failed)


class Work(BaseModel):
    """What a replay extracts (the selection, its handlers, whether done ones again) and how."""

    query: WorkQuery
    settings: ReplaySettings


def _work(
    context: AppContext,
    selection: SnapshotSelection,
    handlers: list[str],
    extractor: str,
    via: Via,
    force: bool,
    stale: bool,
) -> Work:
    """The work with its settings (refused before any run is recorded where they cannot serve)
    and, with ``--stale``, the extraction a done one must have run with."""
    settings = _settings(context, extractor, via, handlers)
    query = WorkQuery(
        handlers=handlers,
        selection=selection,
        force=force,
        stale=_stale(settings, handlers, stale, force),
    )
    return Work(query=query, settings=settings)


def _settings(context: AppContext, extractor: str, via: Via, handlers: list[str]) -> ReplaySettings:
    """The extraction's settings, refused before any run is recorded where they cannot serve."""
    if via == "batch" and extractor == "offline":
        raise ConfigError("--via batch sends the extractions to a provider: --extractor openai")
    settings = context.replay_settings(extractor, asking=True)
    _require_reconcilable(context.store_url, handlers)
    return settings


def _stale(settings: ReplaySettings, handlers: list[str], stale: bool, force: bool) -> Stale | None:
    """``--stale``: per handler, the extraction configured now, which a done extraction must
    have run with not to be work again."""
    if not stale:
        return None
    if force:
        raise ConfigError("--stale runs what another extraction did; --force runs everything")
    return current_extraction(
        extractor_for(settings.extractor, settings.llm), settings.llm, handlers
    )


def _asked(
    selection: SnapshotSelection,
    handlers: list[str],
    extractor: str,
    force: bool,
    stale: bool,
    via: Via,
    audit_dir: str,
) -> dict[str, object]:
    """The run's parameters as its record keeps them."""
    return {
        **selection.model_dump(mode="json", exclude_none=True),
        "handlers": handlers,
        "extractor": extractor,
        "force": force,
        "stale": stale,
        "via": via,
        "audit_dir": str(Path(audit_dir).absolute()),
    }


def _extract(
    store_url: str, run_id: str, work: Work, via: Via, spread: Spread
) -> list[BucketOutcome]:
    """The selected extractions, live (in partitions, at once) or through the Batch API."""
    query, settings = work.query, work.settings
    if via == "batch":
        return replay_via_batch(store_url, query, settings, run_id)
    buckets = select_extraction_work(store_url, query, spread.workers)
    return spread.run(
        replay_bucket,
        [
            {
                "store_url": store_url,
                "items": bucket,
                "settings": settings,
                "run_id": run_id,
                "query": query,
                "part": f"{number}/{len(buckets)}",
            }
            for number, bucket in enumerate(buckets, start=1)
        ],
    )


def _publish(summary: ReplaySummary) -> None:
    publish_table(
        "replay-summary",
        [summary.model_dump(include=COUNTS)],
        f"replay {summary.run_id}: {summary.added} added, {summary.updated} updated, "
        f"{summary.reinforced} reinforced, {summary.failed_retryable + summary.failed_content} "
        "failed",
    )


def _require_reconcilable(store_url: str, handlers: list[str]) -> None:
    with unit_of_work(store_url, existing=True) as uow:
        uow.schema.require_reconcilable(handlers)
