"""Tasks of the replay flow."""

from __future__ import annotations

from prefect import get_run_logger

from mempipe.adapters.llm.batches import OpenAIBatches
from mempipe.adapters.llm.openai_compat import CHAT_ENDPOINT, OpenAIExtractor
from mempipe.adapters.store.unit_of_work import unit_of_work
from mempipe.bootstrap import spend_recorded
from mempipe.domain.partitioning import partition
from mempipe.errors import ConfigError
from mempipe.interrupts import interruptible_sleep, stop_requested
from mempipe.progress import track
from mempipe.schemas.replay import ReplaySettings
from mempipe.schemas.work import WorkItem, WorkQuery
from mempipe.services.provider_batches import BatchWork
from mempipe.services.replay.owner_work import replay_by_owner
from mempipe.services.replay.provider_batch import (
    apply_replay_batches,
    extraction_key,
    extraction_requests,
    replay_scope,
)
from mempipe.services.replay.summary import BucketOutcome
from mempipe.settings import load_batch_limits
from mempipe.tasks.extraction import extraction_context
from mempipe.tasks.policies import step

FAILURES_LOGGED = 10
"""A bucket logs its first failures one by one, then their count: a dead provider fails every
extraction the same way, and 100,000 lines of it help nobody."""


@step("select-extraction-work")
def select_extraction_work(store_url: str, query: WorkQuery, buckets: int) -> list[list[WorkItem]]:
    """The work partitioned into at most ``buckets`` lists (see :func:`partition`)."""
    with unit_of_work(store_url) as uow:
        items = uow.work.extraction_work(query)
        parts = partition(items, buckets)
        get_run_logger().info("%d extractions in %d partition(s)", len(items), len(parts))
        return parts


@step("replay-bucket", retry_after=(5, 30))
def replay_bucket(
    store_url: str,
    items: list[WorkItem],
    settings: ReplaySettings,
    run_id: str,
    query: WorkQuery,
    part: str = "1/1",
) -> BucketOutcome:
    """Replays the partition owner by owner (:mod:`mempipe.services.replay.owner_work`): when it
    returns, every owner it was given has been replayed, by this run or another. ``part``:
    which of the run's partitions this is, for its bar (each counts its own extractions)."""
    with unit_of_work(store_url) as uow, spend_recorded(uow):
        label = "replay" if part == "1/1" else f"replay part {part}"
        with track(label, len(items), "extractions") as bar:
            context = extraction_context(settings, run_id, uow).model_copy(
                update={"summarized": []}
            )
            outcome = replay_by_owner(uow, items, context, query, progress=bar.update)
        outcome.selected, outcome.summarized = len(items), len(context.summarized or ())
        results, elsewhere = outcome.results, outcome.done_elsewhere
        failed = [r for r in results if r.failure_class is not None]
        logger = get_run_logger()
        logger.info(
            "%d extractions done, %d failed, %d done by another replay meanwhile",
            len(results) - len(failed),
            len(failed),
            elsewhere,
        )
        for failure in failed[
            :FAILURES_LOGGED
        ]:  # the run's error line counts them, once, on stderr
            logger.info(
                "%s/%s failed (%s): %s",
                failure.snapshot_id,
                failure.handler,
                failure.failure_class,
                failure.error,
            )
        if len(failed) > FAILURES_LOGGED:
            logger.info(
                "and %d more failed extraction(s): `mempipe report --run-id %s` lists them all",
                len(failed) - FAILURES_LOGGED,
                run_id,
            )
        return outcome


@step("replay-via-batch")
def replay_via_batch(
    store_url: str, query: WorkQuery, settings: ReplaySettings, run_id: str
) -> list[BucketOutcome]:
    """The open batches an earlier run of the same scope left first, then the selected work
    they did not cover, through the provider's Batch API (a preview's kept answers serve a
    live replay: a batch asks its own)."""
    with unit_of_work(store_url) as uow, spend_recorded(uow):
        context = extraction_context(
            settings.model_copy(update={"kept_answers": None}), run_id, uow
        )
        live = context.extractor
        if not isinstance(live, OpenAIExtractor):
            raise ConfigError(f"--via batch needs an OpenAI-compatible extractor, not {live.name}")
        work = BatchWork(
            uow,
            OpenAIBatches(settings.llm),
            run_id=run_id,
            job="replay",
            scope=replay_scope(settings.llm.model, query.force, query.stale),
            endpoint=CHAT_ENDPOINT,
            limits=load_batch_limits(),
            retry=settings.retry,
            sleep=interruptible_sleep,
        )
        adopted = work.adopt()
        outcomes = apply_replay_batches(
            uow, work, adopted, live, context, force=query.force, stale=query.stale
        )
        if not stop_requested():
            covered = {key for batch in adopted for key in batch.items}
            items = [
                item
                for item in uow.work.extraction_work(query)
                if extraction_key(item.handler, item.snapshot_id) not in covered
            ]
            submitted = work.submit(extraction_requests(uow, items, live))
            outcomes += apply_replay_batches(
                uow, work, submitted, live, context, force=query.force, stale=query.stale
            )
        get_run_logger().info(
            "%d batch(es) applied (%d adopted from an earlier run)", len(outcomes), len(adopted)
        )
        return outcomes
