"""Tasks of the re-embed flows."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from mempipe.adapters.embedding import embedder_for
from mempipe.adapters.store import open_store
from mempipe.schemas.embedding import CollectionReport, GateReport
from mempipe.services.evaluation import read_queries
from mempipe.services.reembed import embed_collection, recall_gate, target_state
from mempipe.tasks.policies import retry_if_transient


@task(
    name="embed-collection",
    cache_policy=NO_CACHE,
    retries=2,
    retry_delay_seconds=[5, 30],
    retry_condition_fn=retry_if_transient,
)
def embed_collection_task(
    store_url: str, collection: str, model: str, batch_size: int, run_id: str, incremental: bool
) -> CollectionReport:
    """Idempotent: only the vectors still missing are written."""
    embedder = embedder_for(model)
    with closing(open_store(store_url, migrate=False)) as store:
        if incremental:
            serving = store.active_embedding(collection)
            if serving is not None:
                embedder = embedder_for(serving[0])
        state = target_state(store, collection, embedder.model_id, incremental=incremental)
        report = embed_collection(
            store, collection, embedder, run_id=run_id, batch_size=batch_size, state=state
        )
    get_run_logger().info(
        "%s: %d records, %d with a %s vector (%d new, %d unembeddable)",
        collection,
        report.records,
        report.vectors,
        embedder.model_id,
        report.embedded_now,
        report.unembeddable,
    )
    return report


@task(name="recall-gate", cache_policy=NO_CACHE)
def recall_gate_task(
    store_url: str, queries_path: str, model: str, min_ratio: float
) -> GateReport | None:
    with closing(open_store(store_url, migrate=False)) as store:
        return recall_gate(store, embedder_for, read_queries(Path(queries_path)), model, min_ratio)


@task(name="switch-models", cache_policy=NO_CACHE)
def switch_models(store_url: str, collections: list[str], model: str) -> None:
    with closing(open_store(store_url, migrate=False)) as store:
        store.switch_models(collections, model)
    get_run_logger().info("switched %s to %s", ", ".join(collections), model)


@task(name="finalize-models", cache_policy=NO_CACHE)
def finalize_models(store_url: str, collections: list[str]) -> list[str]:
    with closing(open_store(store_url, migrate=False)) as store:
        return store.finalize_models(collections)


@task(name="rollback-models", cache_policy=NO_CACHE)
def rollback_models(store_url: str, collections: list[str]) -> list[str]:
    with closing(open_store(store_url, migrate=False)) as store:
        return store.rollback_models(collections)
