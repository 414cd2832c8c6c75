"""Re-embed: move every record to another embedding model (blue/green), or fill what the
serving model lacks (``incremental``, the nightly job); finalize or roll back a move.

Each collection is cut into ``partitions`` id ranges, embedded in parallel on threads
or on Dask workers (``task_runner="dask"``: a local cluster of ``partitions`` processes,
or the scheduler at ``dask_address``); every range writes only what is missing. Re-embeds,
finalizes and rollbacks of one store never overlap: each holds the store's ``reembed``
lock (held in the store by this live run), waiting up to ``lock_wait_s`` for it.

Nothing changes what search serves until the run succeeds: the model is probed before the
registry is touched (an unreachable or unknown model fails here, naming the cause), a
collection's vectors are filled beside the serving ones, and a collection switches only
once its vectors are complete (and, for a move, verified by the recall gate). A collection
that had no model yet is built the same way and switched at the end. Complete means a
vector of the declared dimension, finite, for every record whose text the model did not
refuse: a provider that fails, hangs or answers malformed leaves the registry as it was,
and the run fails naming the cause (run it again: it resumes).

``via="batch"`` sends the requests through the provider's Batch API instead, one task per
collection (``partitions`` and the task runner do not apply): a run adopts the batches a
killed one left open before it submits anything (:mod:`mempipe.services.reembed.provider_batch`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, ClassVar

from prefect import get_run_logger
from prefect.runtime import flow_run
from pydantic import BaseModel, Field

from mempipe.adapters.embedding import Embedder, embedder_for
from mempipe.adapters.embedding.openai_compat import OpenAIEmbedder
from mempipe.adapters.embedding.registry import OPENAI_MODEL
from mempipe.adapters.llm.openai_compat import describing_only
from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.bootstrap import AppContext, load_context
from mempipe.domain.reembed import chosen_gate_source, decide_switch
from mempipe.errors import ConfigError, IncompleteRunError
from mempipe.flows.hooks import job_flow
from mempipe.flows.job import Job, ListsCollections
from mempipe.flows.recorded_run import concluded, recorded_run
from mempipe.interrupts import handle_stop_signals
from mempipe.scaleout import Spread, TaskRunnerName
from mempipe.schemas.config import ProjectConfig
from mempipe.schemas.costs import RunPlan, Via
from mempipe.schemas.embedding import COLLECTIONS, Bridge, CollectionName, ModelState
from mempipe.schemas.reembed import CollectionReport, ReembedPreview, ReembedSummary
from mempipe.services.evaluation import read_queries
from mempipe.services.reembed.bridge import BRIDGE_PAIRS
from mempipe.settings import load_batch_limits, load_llm_settings, load_retry_policy
from mempipe.tasks.artifacts import publish_table
from mempipe.tasks.reembed import (
    EmbeddingPlan,
    count_vectors,
    embed_range,
    embed_via_batch,
    finalize_models,
    find_cuts,
    fit_bridge,
    plan_embedding,
    probe_model,
    recall_gate,
    rollback_models,
    switch_models,
)

PREVIEWING = {"preview", "html"}
"""The request's fields that choose what is previewed, not the flow's parameters."""
PREVIEW_SAMPLE = 1000
"""Records a preview draws per collection, besides those its gate's queries name."""


class Reembed(Job[ReembedSummary], ListsCollections):
    """The request of ``mempipe reembed``: the options of the command, the parameters of
    :func:`reembed_flow`."""

    command_only: ClassVar[frozenset[str]] = frozenset(PREVIEWING)

    model: str | None = None
    dimensions: Annotated[int, Field(ge=1)] | None = None
    collections: list[CollectionName] | None = None
    batch_size: Annotated[int, Field(ge=1, le=10_000)] = 256
    gate: str | None = None
    gate_source: CollectionName | None = None
    min_recall_ratio: Annotated[float, Field(ge=0, le=10)] = 0.95
    incremental: bool = False
    partitions: Annotated[int, Field(ge=1, le=256)] = 1
    via: Via = "live"
    task_runner: TaskRunnerName = TaskRunnerName.THREADS
    dask_address: str | None = None
    bridge: bool = False
    sample: Annotated[int, Field(ge=1)] | None = None
    seed: int = 0
    preview: bool = False
    html: bool = False

    def check(self, context: AppContext) -> None:
        """The model named is known (its plan needs no key; the run's own check asks for one)."""
        if self.bridge and (self.incremental or self.preview):
            raise ConfigError(
                "--bridge fits a map beside a move to another model: leave out "
                + ("--incremental" if self.incremental else "--preview (it writes nothing)")
            )
        if self.model is not None:
            with describing_only():
                embedder_for(target_model(self.model, self.dimensions, context.config))
        if self.gate:
            chosen_gate_source(self.gate_source, chosen_collections(self.collections))

    def plan(self, context: AppContext) -> RunPlan:
        return _plan(context.store_url, self, context.config)

    def run(self, context: AppContext) -> ReembedSummary:
        return reembed_flow(**self.model_dump(exclude=PREVIEWING), **context.flow_options())

    def previewed(self, context: AppContext) -> ReembedPreview:
        """What the move would do to a sample of each collection, written nowhere (module
        notes of :mod:`mempipe.services.reembed.preview`)."""
        from mempipe.services.reembed.preview import GateAsk, preview_move
        from mempipe.services.reembed.preview_page import write_reembed_preview_page

        chosen = chosen_collections(self.collections)
        model_id = target_model(self.model, self.dimensions, context.config)
        embedder = _usable(model_id, self.dimensions, "live", named=self.model is not None)
        gate = None
        if self.gate:
            source = chosen_gate_source(self.gate_source, chosen)
            gate = GateAsk(read_queries(Path(self.gate)), source, self.min_recall_ratio)
        plan = self.plan(context)
        with unit_of_work(context.store_url, read_only=True, existing=True) as uow:
            found = preview_move(
                uow,
                chosen,
                embedder,
                sample=self.sample or PREVIEW_SAMPLE,
                seed=self.seed,
                gate=gate,
                retry=load_retry_policy(),
                plan=plan,
                costs=context.config.costs,
                llm=load_llm_settings(),
            )
        if self.html:
            found.html = str(write_reembed_preview_page(found, context.kept_answers))
        failed = [c for c in found.collections if c.failed]
        if failed:  # the provider failed part of the sample: said, and the command fails
            raise IncompleteRunError(
                f"{sum(c.failed for c in failed)} sampled record(s) got no vector of "
                f"{found.model}: {failed[0].provider_error}",
                found,
            )
        return found


def _plan(store_url: str, request: Reembed, config: ProjectConfig) -> RunPlan:
    with unit_of_work(store_url, read_only=True, existing=True) as uow:
        from mempipe.services.reembed.plan import reembed_plan

        return reembed_plan(
            uow,
            chosen_collections(request.collections),
            target_model(request.model, request.dimensions, config),
            incremental=request.incremental,
            batch_size=request.batch_size,
            via=request.via,
            costs=config.costs,
            llm=load_llm_settings(),
            limits=load_batch_limits(),
            bridge=(request.sample or BRIDGE_PAIRS, request.seed) if request.bridge else None,
        )


class FitBridge(Job[BaseModel], ListsCollections):
    """The request of ``reembed bridge``: each collection's bridge from ``model`` fitted and
    kept, nothing moved (the move that follows with ``--bridge`` and the same sample reuses
    it)."""

    model: str
    collections: list[CollectionName] | None = None
    sample: Annotated[int, Field(ge=1)] | None = None
    seed: int = 0

    def check(self, context: AppContext) -> None:
        with describing_only():
            embedder_for(self.model)

    def plan(self, context: AppContext) -> RunPlan:
        from mempipe.services.reembed.bridge import bridge_lines
        from mempipe.services.run_plans import run_plan

        costs, pairs = context.config.costs, self.sample or BRIDGE_PAIRS
        with unit_of_work(context.store_url, read_only=True, existing=True) as uow:
            chosen = chosen_collections(self.collections)
            lines = bridge_lines(uow, chosen, self.model, pairs, self.seed)
            return run_plan("reembed", uow.url, "live", lines, 0, costs, load_llm_settings(), [])

    def run(self, context: AppContext) -> Bridges:
        return Bridges(bridges=reembed_bridge_flow(**self.model_dump(), **context.flow_options()))


class Bridges(BaseModel):
    """What ``reembed bridge`` fitted (or found fitted)."""

    bridges: list[Bridge]


class EndMove(Job[BaseModel], ListsCollections):
    """The request of ``reembed finalize`` and ``reembed rollback``: ``end`` names its flow."""

    prepares_store: ClassVar[bool] = False
    collections: list[CollectionName] | None = None

    @staticmethod
    def end() -> Callable[..., list[str]]:
        raise NotImplementedError

    def run(self, context: AppContext) -> Collections:
        done = self.end()(**self.model_dump(), **context.flow_options())
        return Collections(collections=done)


class Finalize(EndMove):
    @staticmethod
    def end() -> Callable[..., list[str]]:
        return reembed_finalize_flow


class Rollback(EndMove):
    @staticmethod
    def end() -> Callable[..., list[str]]:
        return reembed_rollback_flow


class Collections(BaseModel):
    """What finalize and rollback touched."""

    collections: list[str]


@job_flow("reembed")
def reembed_flow(
    model: str | None = None,
    dimensions: Annotated[int, Field(ge=1)] | None = None,
    collections: list[CollectionName] | None = None,
    batch_size: Annotated[int, Field(ge=1, le=10_000)] = 256,
    gate: str | None = None,
    gate_source: CollectionName | None = None,
    min_recall_ratio: Annotated[float, Field(ge=0, le=10)] = 0.95,
    incremental: bool = False,
    partitions: Annotated[int, Field(ge=1, le=256)] = 1,
    via: Via = "live",
    task_runner: TaskRunnerName = TaskRunnerName.THREADS,
    dask_address: str | None = None,
    bridge: bool = False,
    sample: Annotated[int, Field(ge=1)] | None = None,
    seed: int = 0,
    lock_wait_s: Annotated[float, Field(ge=0)] = 60,
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
) -> ReembedSummary:
    """Move every record to ``model``, or fill what the serving model lacks (module notes)."""
    handle_stop_signals()
    context = load_context(store, config, store_secret)
    store_url, chosen = context.store_url, chosen_collections(collections)
    source = chosen_gate_source(gate_source, chosen) if gate else None
    model_id, embedder = _target(context, chosen, model, dimensions, incremental, via)
    asked = {"model": model_id, "collections": chosen, "incremental": incremental, "via": via}
    with recorded_run(context, "reembed", asked, lock="reembed", lock_wait_s=lock_wait_s) as run:
        plans = _plans(store_url, chosen, model_id, incremental, partitions)
        bridges = _bridges(store_url, chosen, model_id, sample, seed) if bridge else []
        spread = Spread(task_runner=task_runner, workers=partitions, dask_address=dask_address)
        reports = _embed(store_url, plans, run.run_id, via, batch_size, spread)
        summary = _summary(run.run_id, store_url, model_id, embedder, incremental, reports, bridges)
        if not incremental and source:
            summary.gate = recall_gate(store_url, gate, source, model_id, min_recall_ratio)
        _switch(store_url, summary, plans)
        run.end(summary.run_counts(), summary.reason)
    headline = f"{model_id} incomplete" if incremental else f"not switched to {model_id}"
    return concluded(summary, "reembed", summary.reason and f"{headline}: {summary.reason}")


def _target(
    context: AppContext,
    chosen: list[str],
    model: str | None,
    dimensions: int | None,
    incremental: bool,
    via: Via,
) -> tuple[str, Embedder]:
    """The model the run embeds with, and its embedder: a fill's is the model that serves the
    collections (each gets its serving model's vectors), a move's the one asked for; then the
    store must be searchable."""
    model_id = target_model(model, dimensions, context.config)
    if incremental and model is None:
        model_id = _serving(context.store_url, chosen) or model_id
    embedder = _usable(model_id, dimensions, via, named=model is not None)
    _require_search(context.store_url)  # its switch needs a queryable vector index
    return model_id, embedder


def _summary(
    run_id: str,
    store_url: str,
    model_id: str,
    embedder: Embedder,
    incremental: bool,
    reports: list[CollectionReport],
    bridges: list[Bridge],
) -> ReembedSummary:
    summary = ReembedSummary(
        run_id=run_id, store=store_url, model=model_id, dimensions=embedder.dimensions
    )
    summary.incremental, summary.collections, summary.bridges = incremental, reports, bridges
    return summary


def _serving(store_url: str, collections: list[str]) -> str | None:
    """The model that serves the collections, where one model serves them all."""
    with unit_of_work(store_url, read_only=True, existing=True) as uow:
        served = {uow.models.serving_model(c) for c in collections} - {None}
        return served.pop() if len(served) == 1 else None


def _usable(model_id: str, dimensions: int | None, via: Via, *, named: bool) -> Embedder:
    """The model's embedder, refused before any run is recorded where it cannot serve
    (``named``: the operator named it; else it is the configured one, and the refusal says
    so)."""
    embedder = embedder_for(model_id)
    if dimensions is not None and dimensions != embedder.dimensions:
        which = "" if named else " (the configured model: name another with --model)"
        raise ConfigError(
            f"{model_id}{which} gives {embedder.dimensions} dimensions, not {dimensions}"
        )
    if via == "batch" and not isinstance(embedder, OpenAIEmbedder):
        raise ConfigError(
            f"{model_id}: --via batch needs an OpenAI-compatible model (openai:<model>); "
            "a local model has no Batch API"
        )
    return embedder


def _plans(
    store_url: str, chosen: list[str], model_id: str, incremental: bool, partitions: int
) -> list[EmbeddingPlan]:
    """The model probed (before the registry is touched), then each collection's plan. A move
    whose every collection is cut from the vectors it holds (a Matryoshka model's smaller size)
    sends no request, and no probe."""
    if incremental or not all(find_cuts(store_url, chosen, model_id).values()):
        probe_model(model_id)
    retry = load_retry_policy()
    return [plan_embedding(store_url, c, model_id, incremental, partitions, retry) for c in chosen]


def _bridges(
    store_url: str, chosen: list[str], model_id: str, sample: int | None, seed: int
) -> list[Bridge]:
    """Each collection's bridge into what serves it now, fitted before anything is moved: from
    here a search the serving model cannot embed is answered through it."""
    pairs = sample or BRIDGE_PAIRS
    fitted = [fit_bridge(store_url, c, model_id, pairs, seed) for c in chosen]
    return [b for b in fitted if b is not None]


def _embed(
    store_url: str,
    plans: list[EmbeddingPlan],
    run_id: str,
    via: Via,
    batch_size: int,
    spread: Spread,
) -> list[CollectionReport]:
    """Every plan's missing vectors, live (id ranges at once) or through the Batch API (one
    task per collection, on threads)."""
    if via == "live":
        return _embed_live(store_url, plans, batch_size, run_id, spread)
    reports = Spread(workers=len(plans)).run(
        embed_via_batch, [{"store_url": store_url, "plan": p, "run_id": run_id} for p in plans]
    )
    return [count_vectors(store_url, p, [r]) for p, r in zip(plans, reports, strict=True)]


def _switch(store_url: str, summary: ReembedSummary, plans: list[EmbeddingPlan]) -> None:
    """Switch what the rule lets switch (:func:`mempipe.domain.reembed.decide_switch`), say
    why the rest did not, and publish the run's table."""
    building = [p.collection for p in plans if p.state == ModelState.BUILDING.value]
    decision = decide_switch(
        summary.collections, building, incremental=summary.incremental, gate=summary.gate
    )
    if decision.switch:
        switch_models(store_url, decision.switch, summary.model)
    summary.switched, summary.reason = bool(decision.switch), decision.reason
    if summary.reason:
        get_run_logger().warning("not switched to %s: %s", summary.model, summary.reason)
    publish_table(
        "reembed-summary",
        [r.model_dump() for r in summary.collections],
        f"reembed {summary.run_id} to {summary.model}: "
        + ("switched" if summary.switched else summary.reason or "incremental"),
    )


def _embed_live(
    store_url: str,
    plans: list[EmbeddingPlan],
    batch_size: int,
    run_id: str,
    spread: Spread,
) -> list[CollectionReport]:
    """Every plan's id ranges embedded at once, then added up per collection."""
    ranges = [(plan, id_range) for plan in plans for id_range in plan.ranges]
    parts = iter(
        spread.run(
            embed_range,
            [
                {
                    "store_url": store_url,
                    "plan": p,
                    "id_range": r,
                    "batch_size": batch_size,
                    "run_id": run_id,
                }
                for p, r in ranges
            ],
        )
    )
    return [count_vectors(store_url, p, [next(parts) for _ in p.ranges]) for p in plans]


def target_model(model: str | None, dimensions: int | None, config: ProjectConfig) -> str:
    """The model a re-embed moves to: ``--model``, else the configured one. ``--dimensions`` is
    the size of an OpenAI-compatible model (``openai:MODEL`` at ``N``: a Matryoshka model's
    smaller size is cut from the vectors the store holds); for any other, the size it must
    have."""
    model_id = model or config.memory.embedding.model
    match = OPENAI_MODEL.match(model_id)
    if dimensions is None or match is None:
        return model_id
    return f"openai:{match['model']}:{dimensions}"


def chosen_collections(collections: list[str] | None) -> list[str]:
    chosen = collections or list(COLLECTIONS)
    unknown = set(chosen) - set(COLLECTIONS)
    if unknown:
        raise ConfigError(f"unknown collections {sorted(unknown)}; known: {list(COLLECTIONS)}")
    return chosen


def _end_move(
    collections: list[CollectionName] | None = None,
    lock_wait_s: Annotated[float, Field(ge=0)] = 60,
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
) -> list[str]:
    """Finalize or roll back (the flow's name says which), holding the store's re-embed lock
    like a re-embed does."""
    step = {"reembed-finalize": finalize_models, "reembed-rollback": rollback_models}
    context = load_context(store, config, store_secret)
    chosen = chosen_collections(collections)
    with recorded_run(
        context,
        flow_run.flow_name,
        {"collections": chosen},
        lock="reembed",
        lock_wait_s=lock_wait_s,
    ) as run:
        done = step[flow_run.flow_name](context.store_url, chosen)
        run.end({"collections": len(done)})
    return done


@job_flow("reembed-bridge")
def reembed_bridge_flow(
    model: str,
    collections: list[CollectionName] | None = None,
    sample: Annotated[int, Field(ge=1)] | None = None,
    seed: int = 0,
    lock_wait_s: Annotated[float, Field(ge=0)] = 60,
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
) -> list[Bridge]:
    """Fit each collection's bridge from ``model`` into the vectors serving it, moving nothing:
    from its end, a search the serving model cannot embed answers through it. Its lock is its
    own, so a bridge can be fitted while a move runs (the move's switch retires it)."""
    handle_stop_signals()
    context = load_context(store, config, store_secret)
    chosen = chosen_collections(collections)
    asked = {"model": model, "collections": chosen}
    with recorded_run(
        context, "reembed-bridge", asked, lock="bridge", lock_wait_s=lock_wait_s
    ) as run:
        bridges = _bridges(context.store_url, chosen, model, sample, seed)
        run.end({"bridges": len(bridges)})
    return bridges


def _require_search(store_url: str) -> None:
    with unit_of_work(store_url, existing=True) as uow:
        uow.schema.require_search("reembed")


reembed_finalize_flow = job_flow(
    "reembed-finalize", "Drop the previous model's vectors: the move can no longer be rolled back."
)(_end_move)
reembed_rollback_flow = job_flow(
    "reembed-rollback", "Serve the previous model again; the newer vectors are dropped."
)(_end_move)
