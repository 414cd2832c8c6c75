"""Re-embed: move every record to another embedding model (blue/green), or fill what the
serving model lacks (``incremental``, the nightly job); finalize or roll back a move."""

from __future__ import annotations

from typing import Annotated

from prefect import Task, flow, get_run_logger
from prefect.runtime import flow_run
from pydantic import Field

from mempipe.adapters.embedding import embedder_for
from mempipe.bootstrap import load_context
from mempipe.errors import ConfigError, IncompleteRunError
from mempipe.flows.hooks import record_failed_run
from mempipe.heartbeat import keep_alive
from mempipe.interrupts import handle_stop_signals, raise_if_stopped
from mempipe.locks import store_lock
from mempipe.scaleout import TaskRunnerName, run_partitions
from mempipe.schemas.embedding import COLLECTIONS, CollectionReport, ModelState, ReembedSummary
from mempipe.settings import load_retry_policy
from mempipe.tasks.artifacts import publish_table
from mempipe.tasks.reembed import (
    count_vectors,
    embed_range,
    finalize_models,
    plan_embedding,
    probe_model,
    recall_gate,
    rollback_models,
    switch_models,
)
from mempipe.tasks.runs import prepare_store, record_run_end, record_run_start


@flow(name="reembed", on_failure=[record_failed_run], on_crashed=[record_failed_run])
def reembed_flow(
    model: str | None = None,
    dimensions: Annotated[int, Field(ge=1)] | None = None,
    collections: list[str] | None = None,
    batch_size: Annotated[int, Field(ge=1, le=10_000)] = 256,
    gate: str | None = None,
    min_recall_ratio: Annotated[float, Field(ge=0, le=10)] = 0.95,
    incremental: bool = False,
    partitions: Annotated[int, Field(ge=1, le=256)] = 1,
    task_runner: TaskRunnerName = TaskRunnerName.THREADS,
    dask_address: str | None = None,
    lock_wait_s: Annotated[float, Field(ge=0)] = 60,
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
) -> ReembedSummary:
    """Each collection is cut into ``partitions`` id ranges, embedded in parallel on threads
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
    and the run fails naming the cause (run it again: it resumes)."""
    handle_stop_signals()
    context = load_context(store, config, store_secret)
    retry = load_retry_policy()
    run_id = str(flow_run.id)
    model_id = model or context.config.memory.embedding.model
    embedder = embedder_for(model_id)
    if dimensions is not None and dimensions != embedder.dimensions:
        raise ConfigError(f"{model_id} gives {embedder.dimensions} dimensions, not {dimensions}")
    chosen = collections or list(COLLECTIONS)
    unknown = set(chosen) - set(COLLECTIONS)
    if unknown:
        raise ConfigError(f"unknown collections {sorted(unknown)}; known: {list(COLLECTIONS)}")
    prepare_store(context.store_url, config)
    record_run_start(
        context.store_url,
        run_id,
        "reembed",
        {"model": model_id, "collections": chosen, "incremental": incremental},
    )
    with (
        keep_alive(context.store_url, run_id),
        store_lock("reembed", context.store_url, run_id, lock_wait_s),
    ):
        probe_model(model_id)
        plans = [
            plan_embedding(context.store_url, c, model_id, incremental, partitions, retry)
            for c in chosen
        ]
        parts = run_partitions(
            embed_range,
            [
                {
                    "store_url": context.store_url,
                    "plan": plan,
                    "id_range": id_range,
                    "batch_size": batch_size,
                    "run_id": run_id,
                }
                for plan in plans
                for id_range in plan.ranges
            ],
            task_runner,
            partitions,
            dask_address,
        )
        done = iter(parts)
        reports = [
            count_vectors(context.store_url, plan, [next(done) for _ in plan.ranges])
            for plan in plans
        ]
        summary = ReembedSummary(
            run_id=run_id,
            store=context.store_url,
            model=model_id,
            dimensions=embedder.dimensions,
            incremental=incremental,
            collections=reports,
        )
        incomplete = [r.collection for r in reports if not r.complete]
        building = [p.collection for p in plans if p.state == ModelState.BUILDING.value]
        if not incremental:
            summary.gate = (
                recall_gate(context.store_url, gate, model_id, min_recall_ratio) if gate else None
            )
            if incomplete:
                summary.reason = _incomplete(reports, "new vector")
            elif summary.gate is not None and not summary.gate.passed:
                summary.reason = (
                    f"recall ratio {summary.gate.ratio} is below {summary.gate.min_ratio}"
                )
            else:
                switch_models(context.store_url, chosen, model_id)
                summary.switched = True
        else:
            first = [c for c in building if c not in incomplete]
            if first:
                switch_models(context.store_url, first, model_id)
                summary.switched = True
            if incomplete:
                summary.reason = _incomplete(reports, "vector")
        if summary.reason:
            get_run_logger().warning("not switched to %s: %s", model_id, summary.reason)
        record_run_end(
            context.store_url,
            run_id,
            {
                "records": sum(r.records for r in reports),
                "embedded": sum(r.embedded_now for r in reports),
                "unembeddable": sum(r.unembeddable for r in reports),
                "failed": sum(r.failed for r in reports),
                "switched": int(summary.switched),
            },
            summary.reason,
        )
        publish_table(
            "reembed-summary",
            [r.model_dump() for r in reports],
            f"reembed {run_id} to {model_id}: "
            + ("switched" if summary.switched else summary.reason or "incremental"),
        )
    if summary.reason:
        raise_if_stopped(summary, "reembed")
        headline = f"{model_id} incomplete" if incremental else f"not switched to {model_id}"
        raise IncompleteRunError(f"{headline}: {summary.reason}", summary)
    return summary


def _incomplete(reports: list[CollectionReport], what: str) -> str:
    """Which collections lack vectors, and the provider's failure where that is why."""
    parts = []
    for report in reports:
        if report.complete:
            continue
        missing = report.records - report.vectors - report.unembeddable
        cause = f" (the provider failed: {report.provider_error})" if report.provider_error else ""
        parts.append(f"{report.collection}: {missing} record(s) without a {what}{cause}")
    return "; ".join(parts)


@flow(name="reembed-finalize", on_failure=[record_failed_run], on_crashed=[record_failed_run])
def reembed_finalize_flow(
    collections: list[str] | None = None,
    lock_wait_s: Annotated[float, Field(ge=0)] = 60,
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
) -> list[str]:
    """Drop the previous model's vectors: the move can no longer be rolled back."""
    return _end_move(finalize_models, collections, lock_wait_s, store, config, store_secret)


@flow(name="reembed-rollback", on_failure=[record_failed_run], on_crashed=[record_failed_run])
def reembed_rollback_flow(
    collections: list[str] | None = None,
    lock_wait_s: Annotated[float, Field(ge=0)] = 60,
    store: str | None = None,
    config: str | None = None,
    store_secret: str | None = None,
) -> list[str]:
    """Serve the previous model again; the newer vectors are dropped."""
    return _end_move(rollback_models, collections, lock_wait_s, store, config, store_secret)


def _end_move(
    step: Task[[str, list[str]], list[str]],
    collections: list[str] | None,
    lock_wait_s: float,
    store: str | None,
    config: str | None,
    store_secret: str | None,
) -> list[str]:
    """Finalize or roll back, holding the store's re-embed lock like a re-embed does."""
    url = load_context(store, config, store_secret).store_url
    run_id = str(flow_run.id)
    chosen = collections or list(COLLECTIONS)
    prepare_store(url, config)
    record_run_start(url, run_id, flow_run.flow_name, {"collections": chosen})
    with keep_alive(url, run_id), store_lock("reembed", url, run_id, lock_wait_s):
        done = step(url, chosen)
    record_run_end(url, run_id, {"collections": len(done)})
    return done
