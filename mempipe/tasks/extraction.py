"""The extraction context a replay or a memory import reconciles with, made where it runs."""

from __future__ import annotations

from prefect import get_run_logger

from mempipe.adapters.llm.registry import extractor_for
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.interrupts import interruptible_sleep
from mempipe.schemas.replay import ReplaySettings
from mempipe.services.embedding import store_embedder
from mempipe.services.replay import ReplayContext, memory_embedding_model


def extraction_context(settings: ReplaySettings, run_id: str, uow: UnitOfWork) -> ReplayContext:
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
        embedder=store_embedder(uow, model),
        thresholds=settings.thresholds,
        retry=settings.retry,
        sleep=interruptible_sleep,
        llm=settings.llm,
    )
