"""The extraction context a replay or a memory import reconciles with, made where it runs."""

from __future__ import annotations

import logging
from pathlib import Path

from prefect import get_run_logger
from prefect.exceptions import MissingContextError

from mempipe.adapters.llm.base import Extractor
from mempipe.adapters.llm.kept import KeptAnswers
from mempipe.adapters.llm.registry import extractor_for
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.interrupts import interruptible_sleep
from mempipe.schemas.replay import ReplaySettings
from mempipe.services.embedding import store_embedder
from mempipe.services.replay.extract import ReplayContext, memory_embedding_model


def extraction_context(
    settings: ReplaySettings, run_id: str, uow: UnitOfWork, *, keep: bool = False
) -> ReplayContext:
    """The extractor, embedder and rules a replay (or a memory import) runs with, made in the
    process that runs it. New memories are embedded with the model that serves the store's
    memories (a re-embed moved it), else with the configured one: any other vector could not
    be searched. A configuration left behind by a re-embed is said, not refused. ``keep``: a
    preview's, which keeps the provider's answers for the replay that follows."""
    model = memory_embedding_model(uow, settings.embedding_model)
    if model != settings.embedding_model:
        _logger().warning(
            "the store's memories are served by %s (a re-embed moved them); the configuration "
            "names %s: new memories are embedded with %s",
            model,
            settings.embedding_model,
            model,
        )
    return ReplayContext(
        run_id=run_id,
        extractor=kept_or_asked(settings, keep=keep),
        embedder=store_embedder(uow, model),
        thresholds=settings.thresholds,
        retry=settings.retry,
        sleep=interruptible_sleep,
        llm=settings.llm,
    )


def kept_or_asked(settings: ReplaySettings, *, keep: bool) -> Extractor:
    """The configured extractor; one with prompts (a provider's) answers first from what a
    preview kept, and, for a preview (``keep``), keeps what it is answered."""
    extractor = extractor_for(settings.extractor, settings.llm)
    if settings.kept_answers is None or not extractor.capabilities.prompts:
        return extractor
    return KeptAnswers(extractor, settings.llm, Path(settings.kept_answers), keep=keep)


def _logger() -> logging.Logger | logging.LoggerAdapter:
    """The run's logger; a preview, which runs no flow, logs to stderr."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("mempipe")
