"""Tasks of the replay flow."""

from __future__ import annotations

import time
from contextlib import closing
from pathlib import Path

import orjson
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from mempipe.adapters.embedding import embedder_for
from mempipe.adapters.llm.factory import extractor_for
from mempipe.adapters.store import Store, open_store
from mempipe.adapters.store.base import WorkItem
from mempipe.domain.liveness import LEASE
from mempipe.progress import track
from mempipe.schemas.replay import ReplaySettings
from mempipe.schemas.selection import SnapshotSelection
from mempipe.services.audit import write_audit
from mempipe.services.replay import ExtractionSummary, ReplayContext, replay_batch
from mempipe.services.replay_summary import BucketOutcome
from mempipe.services.runs import recover_dead_runs
from mempipe.tasks.policies import retry_if_transient

BATCH = 64
"""Extractions embedded together: big enough to batch the model, small enough to bound memory."""


@task(name="select-extraction-work", cache_policy=NO_CACHE)
def select_work(
    store_url: str, selection: SnapshotSelection, handlers: list[str], force: bool, buckets: int
) -> list[list[WorkItem]]:
    """The work partitioned into at most ``buckets`` lists (see :func:`partition`)."""
    with closing(open_store(store_url, migrate=False)) as store:
        items = store.extraction_work(selection, handlers, force=force)
    parts = partition(items, buckets)
    get_run_logger().info("%d extractions in %d partition(s)", len(items), len(parts))
    return parts


def partition(items: list[WorkItem], buckets: int) -> list[list[WorkItem]]:
    """By project, then by ranges of owner ids: each project's owners, in id order, are cut
    into contiguous ranges of about equal work (a project gets ranges in proportion to its
    share), and the ranges are dealt, largest first, into at most ``buckets`` partitions. An
    owner's work is never split: it runs in time order, in one partition."""
    owners = owners_of(items)
    projects: dict[tuple[str, str], list[list[WorkItem]]] = {}
    for key in sorted(owners):
        projects.setdefault(key[:2], []).append(owners[key])
    ranges: list[list[WorkItem]] = []
    for project_owners in projects.values():
        size = sum(len(work) for work in project_owners)
        cuts = max(1, min(len(project_owners), round(buckets * size / len(items))))
        target = size / cuts
        current: list[WorkItem] = []
        for work in project_owners:
            current.extend(work)
            if len(current) >= target:
                ranges.append(current)
                current = []
        if current:
            ranges.append(current)
    dealt: list[list[WorkItem]] = [[] for _ in range(min(buckets, len(ranges)))]
    for work in sorted(ranges, key=len, reverse=True):
        min(dealt, key=len).extend(work)
    return dealt


OWNER_POLL_S = 2.0
"""How often a replay looks again at owners another live replay holds."""


def owner_lease(owner: tuple[str, str, str]) -> str:
    return "replay-owner:" + orjson.dumps(list(owner)).decode()


def owners_of(items: list[WorkItem]) -> dict[tuple[str, str, str], list[WorkItem]]:
    owners: dict[tuple[str, str, str], list[WorkItem]] = {}
    for item in items:
        owners.setdefault(item.partition, []).append(item)
    return owners


def owner_work(
    store: Store,
    selection: SnapshotSelection,
    handlers: list[str],
    owner: tuple[str, str, str],
    force: bool,
) -> list[WorkItem]:
    """The owner's runnable work as the store holds it now, in time order."""
    org, project, user = owner
    narrowed = selection.model_copy(update={"org_id": org, "project_id": project})
    if user:
        narrowed = narrowed.model_copy(update={"user_id": user})
    return [
        item
        for item in store.extraction_work(narrowed, handlers, force=force)
        if item.partition == owner
    ]


@task(
    name="replay-bucket",
    cache_policy=NO_CACHE,
    retries=2,
    retry_delay_seconds=[5, 30],
    retry_condition_fn=retry_if_transient,
)
def replay_bucket(
    store_url: str,
    items: list[WorkItem],
    settings: ReplaySettings,
    run_id: str,
    force: bool,
    selection: SnapshotSelection,
    handlers: list[str],
) -> BucketOutcome:
    """Work is taken per owner: the run holds an owner's lease while it replays that owner,
    and reads the owner's runnable snapshots again, in time order, once the lease is held. So
    two replays never interleave one owner's history, and work another replay did meanwhile
    is not done twice. An owner held by another live replay is waited for (its holder is
    alive and will finish it, or dies and is closed by :func:`recover_dead_runs`): when this
    task returns, every owner it was given has been replayed by someone."""
    context = ReplayContext(
        run_id=run_id,
        extractor=extractor_for(settings.extractor, settings.llm),
        embedder=embedder_for(settings.embedding_model),
        thresholds=settings.thresholds,
        retry=settings.retry,
    )
    owners = owners_of(items)
    results: list[ExtractionSummary] = []
    elsewhere = 0
    with (
        closing(open_store(store_url, migrate=False)) as store,
        track("replay", len(items), "extractions") as bar,
    ):

        def replay_owners(held: list[tuple[str, str, str]]) -> None:
            nonlocal elsewhere
            work: list[WorkItem] = []
            for owner in held:
                fresh = owner_work(store, selection, handlers, owner, force)
                elsewhere += max(0, len(owners[owner]) - len(fresh))
                work.extend(fresh)
            try:
                results.extend(replay_batch(store, work, context))
            finally:
                store.release_leases(run_id, [owner_lease(o) for o in held])
            bar.update(len(results) + elsewhere)

        waiting = list(owners)
        while waiting:
            held: list[tuple[str, str, str]] = []
            busy: list[tuple[str, str, str]] = []
            for owner in waiting:
                if store.acquire_lease(owner_lease(owner), run_id, LEASE) is not None:
                    busy.append(owner)
                    continue
                held.append(owner)
                if sum(len(owners[o]) for o in held) >= BATCH:
                    replay_owners(held)
                    held = []
            if held:
                replay_owners(held)
            if busy and len(busy) == len(waiting):
                time.sleep(OWNER_POLL_S)
                recover_dead_runs(store)
            waiting = busy
    failed = [r for r in results if r.failure_class is not None]
    logger = get_run_logger()
    logger.info(
        "%d extractions done, %d failed, %d done by another replay meanwhile",
        len(results) - len(failed),
        len(failed),
        elsewhere,
    )
    for failure in failed:
        logger.warning(
            "%s/%s failed (%s): %s",
            failure.snapshot_id,
            failure.handler,
            failure.failure_class,
            failure.error,
        )
    return BucketOutcome(results=results, done_elsewhere=elsewhere)


@task(name="export-audit", cache_policy=NO_CACHE)
def export_audit(
    store_url: str,
    out_dir: str,
    run_id: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> list[str]:
    with closing(open_store(store_url, migrate=False)) as store:
        files = write_audit(store.audit_rows(run_id, since, until), Path(out_dir))
    return [str(f) for f in files]
