"""Replay work taken per owner (org, project, user), so that each owner's snapshots are
reconciled in time order whatever else runs.

A run holds an owner's lease while it replays that owner, and reads the owner's runnable
snapshots again, in time order, once the lease is held: two replays never interleave one
owner's history, and work another replay did meanwhile is not done twice. An owner another
live replay holds is waited for (its holder is alive and will finish it, or dies and is closed
by :func:`recover_dead_runs`): when :func:`replay_by_owner` returns, every owner it was given
has been replayed, by this run or another.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import orjson

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.adapters.store.writer_epoch import writer_epoch
from mempipe.domain.liveness import LEASE
from mempipe.domain.partitioning import Owner, owners_of
from mempipe.interrupts import StopRequested, stop_requested
from mempipe.schemas.work import WorkItem, WorkQuery
from mempipe.services.replay.extract import ReplayContext, replay_batch
from mempipe.services.replay.summary import BucketOutcome
from mempipe.services.runs import recover_dead_runs

BATCH = 64
"""Extractions embedded together: big enough to batch the model, small enough to bound memory."""
OWNER_POLL_S = 2.0
"""How often a replay looks again at owners another live replay holds."""


def owner_lease(owner: Owner) -> str:
    return "replay-owner:" + orjson.dumps(list(owner)).decode()


def owner_work(uow: UnitOfWork, query: WorkQuery, owner: Owner) -> list[WorkItem]:
    """The owner's runnable work as the store holds it now, in time order."""
    org, project, user = owner
    narrowed = query.selection.model_copy(update={"org_id": org, "project_id": project})
    if user:
        narrowed = narrowed.model_copy(update={"user_id": user})
    owners = query.model_copy(update={"selection": narrowed})
    return [item for item in uow.work.extraction_work(owners) if item.partition == owner]


def replay_by_owner(
    uow: UnitOfWork,
    items: list[WorkItem],
    context: ReplayContext,
    query: WorkQuery,
    *,
    progress: Callable[[int], object] = lambda _: None,
    keep: Callable[[WorkItem], bool] | None = None,
) -> BucketOutcome:
    """``keep``: only the owners' work it holds is replayed now (a batch's answered
    extractions); the rest of their work is left as it is."""
    owners = owners_of(items)
    outcome = BucketOutcome(results=[])

    def replay_held(held: list[Owner]) -> None:
        work: list[WorkItem] = []
        for owner in held:
            fresh = owner_work(uow, query, owner)
            if keep is not None:
                fresh = [item for item in fresh if keep(item)]
            gone = max(0, len(owners[owner]) - len(fresh))
            if gone and uow.erased_since(*owner, writer_epoch()):
                outcome.erased_meanwhile += gone
            else:
                outcome.done_elsewhere += gone
            work.extend(fresh)
        try:
            outcome.results.extend(replay_batch(uow, work, context))
        except StopRequested:
            pass  # a retry's wait ended by a stop: the batch's items stay as they were
        finally:
            uow.leases.release_leases(context.run_id, [owner_lease(o) for o in held])
        progress(len(outcome.results) + outcome.done_elsewhere + outcome.erased_meanwhile)

    waiting = list(owners)
    while waiting and not stop_requested():
        held: list[Owner] = []
        busy: list[Owner] = []
        for owner in waiting:
            if stop_requested():
                break
            if uow.leases.acquire_lease(owner_lease(owner), context.run_id, LEASE) is not None:
                busy.append(owner)
                continue
            held.append(owner)
            if sum(len(owners[o]) for o in held) >= BATCH:
                replay_held(held)
                held = []
        if held:
            replay_held(held)
        if busy and len(busy) == len(waiting) and not stop_requested():
            time.sleep(OWNER_POLL_S)
            recover_dead_runs(uow)
        waiting = busy
    return outcome
