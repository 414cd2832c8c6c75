"""Tasks of the re-embed flows."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger
from pydantic import BaseModel

from mempipe.adapters.embedding import embedder_for
from mempipe.adapters.embedding.openai_compat import OpenAIEmbedder
from mempipe.adapters.embedding.registry import options_for
from mempipe.adapters.llm.batches import OpenAIBatches
from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.bootstrap import spend_recorded
from mempipe.domain.failures import RetryPolicy
from mempipe.errors import ConfigError, MempipeError
from mempipe.interrupts import interruptible_sleep
from mempipe.schemas.embedding import Bridge
from mempipe.schemas.reembed import CollectionReport, GateReport
from mempipe.services.embedding import PROBE_TEXT, store_embedder
from mempipe.services.evaluation import read_queries
from mempipe.services.provider_batches import BatchWork
from mempipe.services.reembed import fill as reembedding
from mempipe.services.reembed.bridge import fitted_bridge
from mempipe.services.reembed.fill import (
    IdRange,
    cut_collection,
    cut_source,
    embed_collection,
    id_ranges,
    registration,
    target_state,
)
from mempipe.services.reembed.provider_batch import embed_collection_via_batch, scope_of
from mempipe.settings import load_batch_limits, load_llm_settings, load_retry_policy
from mempipe.tasks.policies import step


class EmbeddingPlan(BaseModel):
    """One collection's part of a re-embed: the model, the registry state it fills, and the
    id ranges it is cut into."""

    collection: str
    model_id: str
    state: str
    ranges: list[IdRange]
    retry: RetryPolicy = RetryPolicy()
    cut_from: str | None = None
    """The serving model whose vectors the new ones are cut from (a Matryoshka model's smaller
    size): no provider call but for records it has no vector for."""
    dimensions: int = 0


PROBE_RETRY = RetryPolicy(max_attempts=2, max_seconds=20)
"""A model that does not answer a one-text probe fails the run at once, before any change."""


@step("probe-model")
def probe_model(model: str) -> int:
    """Embed one text with ``model`` (as a document, and as a query where the model has two
    sides) before anything is registered: an unknown model, a refused connection, rejected
    credentials or a side the provider does not take fail here, naming the cause. Returns the
    dimensions."""
    embedder = embedder_for(model)
    sides = (embedder.embed,) if embedder.symmetric else (embedder.embed, embedder.embed_query)
    for side in sides:
        try:
            (vector,) = PROBE_RETRY.run(lambda side=side: side([PROBE_TEXT]))
        except MempipeError as exc:
            raise ConfigError(f"{model} cannot embed, so nothing was changed: {exc}") from exc
        if vector is None or len(vector) != embedder.dimensions:
            raise ConfigError(f"{model} gave no usable vector for a probe; nothing was changed")
    return embedder.dimensions


@step("plan-embedding")
def plan_embedding(
    store_url: str,
    collection: str,
    model: str,
    incremental: bool,
    partitions: int,
    retry: RetryPolicy,
) -> EmbeddingPlan:
    """Registers the model's vector index once, before any range writes into it, with the
    options it is asked with (a provider model's sides), recorded for every later process."""
    with unit_of_work(store_url) as uow:
        embedder = store_embedder(uow, model)
        if incremental:
            serving = uow.models.active_embedding(collection)
            if serving is not None:
                embedder = store_embedder(uow, serving[0])
        state = target_state(uow, collection, embedder.model_id, incremental=incremental)
        options = options_for(model, embedder.model_id)
        uow.vectors.register_model(registration(collection, embedder, state, options))
        cut_from = None if incremental else cut_source(uow, collection, embedder.model_id)
        ranges = id_ranges(uow.vectors.record_id_bounds(collection), 1 if cut_from else partitions)
        return EmbeddingPlan(
            collection=collection,
            model_id=embedder.model_id,
            state=state,
            ranges=ranges,
            retry=retry,
            cut_from=cut_from,
            dimensions=embedder.dimensions,
        )


@step("find-cuts")
def find_cuts(store_url: str, collections: list[str], model_id: str) -> dict[str, str | None]:
    """Each collection's serving model where ``model_id``'s vectors can be cut from it."""
    with unit_of_work(store_url, read_only=True) as uow:
        return {c: cut_source(uow, c, model_id) for c in collections}


@step("embed-range", retry_after=(5, 30))
def embed_range(
    store_url: str, plan: EmbeddingPlan, id_range: IdRange, batch_size: int, run_id: str
) -> CollectionReport:
    """Idempotent: only the vectors still missing in the range are written. A cut writes what
    it derives first; the embedder is asked only for what is left."""
    with unit_of_work(store_url) as uow, spend_recorded(uow):
        cut = 0
        if plan.cut_from is not None:
            cut = cut_collection(
                uow, plan.collection, plan.cut_from, plan.model_id, plan.dimensions, batch_size
            )
        report = embed_collection(
            uow,
            plan.collection,
            store_embedder(uow, plan.model_id),
            run_id=run_id,
            batch_size=batch_size,
            retry=plan.retry,
            sleep=interruptible_sleep,
            state=plan.state,
            id_range=id_range,
        )
        return report.model_copy(update={"embedded_now": report.embedded_now + cut})


@step("embed-via-batch", retry_after=(5, 30))
def embed_via_batch(store_url: str, plan: EmbeddingPlan, run_id: str) -> CollectionReport:
    """The collection's missing vectors through the provider's Batch API: the batches an
    earlier run left open first, then what is still missing. Idempotent like a live range."""
    with unit_of_work(store_url) as uow, spend_recorded(uow):
        embedder = store_embedder(uow, plan.model_id)
        if not isinstance(embedder, OpenAIEmbedder):
            raise ConfigError(f"{plan.model_id}: --via batch needs an OpenAI-compatible model")
        work = BatchWork(
            uow,
            OpenAIBatches(load_llm_settings()),
            run_id=run_id,
            job="reembed",
            scope=scope_of(plan.collection, plan.model_id),
            endpoint=embedder.endpoint,
            limits=load_batch_limits(),
            retry=plan.retry,
            sleep=interruptible_sleep,
        )
        report = embed_collection_via_batch(uow, work, plan.collection, embedder, state=plan.state)
        get_run_logger().info(
            "%s: %d batch(es) applied (%d adopted from an earlier run)",
            plan.collection,
            report.batches,
            report.batches_adopted,
        )
        return report


@step("count-vectors")
def count_vectors(
    store_url: str, plan: EmbeddingPlan, parts: list[CollectionReport]
) -> CollectionReport:
    """The ranges' work added up, with the collection's counts read once all are done."""
    with unit_of_work(store_url) as uow:
        records, vectors = uow.vectors.vector_counts(plan.collection, plan.model_id)
        resumed = [p.resumed_after for p in parts if p.resumed_after is not None]
        unembeddable, failed = sum(p.unembeddable for p in parts), sum(p.failed for p in parts)
        if failed:  # a range stopped sending once the provider was down: what it left is failed too
            failed = max(failed, records - vectors - unembeddable)
        report = CollectionReport(
            collection=plan.collection,
            model_id=plan.model_id,
            records=records,
            vectors=vectors,
            embedded_now=sum(p.embedded_now for p in parts),
            unembeddable=unembeddable,
            failed=failed,
            provider_error=next((p.provider_error for p in parts if p.provider_error), None),
            resumed_after=min(resumed) if resumed else None,
            batches=sum(p.batches for p in parts),
            batches_adopted=sum(p.batches_adopted for p in parts),
        )
        get_run_logger().info(
            "%s: %d records, %d with a %s vector (%d new, %d unembeddable, %d failed, %d range(s))",
            plan.collection,
            report.records,
            report.vectors,
            plan.model_id,
            report.embedded_now,
            report.unembeddable,
            report.failed,
            len(parts),
        )
        return report


@step("recall-gate")
def recall_gate(
    store_url: str, queries_path: str, source: str, model: str, min_ratio: float
) -> GateReport | None:
    """Measured only once the new model's index answers and has caught up with the writes:
    an index still building would score as a bad model."""
    with unit_of_work(store_url) as uow, spend_recorded(uow):
        uow.models.wait_searchable([source], model)
        return reembedding.recall_gate(
            uow, embedder_for, read_queries(Path(queries_path)), model, min_ratio, source=source
        )


@step("fit-bridge")
def fit_bridge(
    store_url: str, collection: str, model: str, sample: int, seed: int
) -> Bridge | None:
    with unit_of_work(store_url) as uow, spend_recorded(uow):
        bridge = fitted_bridge(
            uow, collection, embedder_for(model), pairs=sample, seed=seed, retry=load_retry_policy()
        )
    if bridge is not None:
        get_run_logger().info(
            "bridge %s: %s into %s on %d pairs (held-out cosine %.3f)",
            collection,
            model,
            bridge.serving_model,
            bridge.pairs,
            bridge.held_out_cosine,
        )
        if bridge.poor:
            get_run_logger().warning(bridge.poor)
    return bridge


@step("switch-models")
def switch_models(store_url: str, collections: list[str], model: str) -> None:
    with unit_of_work(store_url) as uow:
        uow.models.switch_models(collections, model)
        get_run_logger().info("switched %s to %s", ", ".join(collections), model)


@step("finalize-models")
def finalize_models(store_url: str, collections: list[str]) -> list[str]:
    with unit_of_work(store_url) as uow:
        return uow.models.finalize_models(collections)


@step("rollback-models")
def rollback_models(store_url: str, collections: list[str]) -> list[str]:
    with unit_of_work(store_url) as uow:
        return uow.models.rollback_models(collections)
