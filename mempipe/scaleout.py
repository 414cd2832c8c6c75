"""Where a flow's partitions run: threads in the flow's own process (the default), or a Dask
cluster through prefect-dask, a local one of N worker processes or an existing scheduler.

Every partition is an idempotent task, so a partition retried or run twice changes nothing;
the result does not depend on where it ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from prefect import Task
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner
from pydantic import BaseModel


class TaskRunnerName(StrEnum):
    THREADS = "threads"
    DASK = "dask"


def task_runner(name: TaskRunnerName, workers: int, dask_address: str | None) -> TaskRunner:
    if name is TaskRunnerName.THREADS:
        return ThreadPoolTaskRunner(max_workers=workers)
    from prefect_dask import DaskTaskRunner

    if dask_address:
        return DaskTaskRunner(address=dask_address)
    return DaskTaskRunner(
        cluster_kwargs={"n_workers": workers, "threads_per_worker": 1, "dashboard_address": None}
    )


def run_partitions(
    task: Task[..., Any],
    partitions: Sequence[dict[str, Any]],
    name: TaskRunnerName,
    workers: int,
    dask_address: str | None = None,
) -> list[Any]:
    """Run ``task`` once per partition (its parameters) on the chosen runner; results in the
    partitions' order."""
    if not partitions:
        return []
    with task_runner(name, workers, dask_address) as runner:
        futures = [runner.submit(task, parameters=dict(p)) for p in partitions]
        return [future.result() for future in futures]


class Spread(BaseModel):
    """Where a job's partitions run: ``task_runner`` with ``workers`` at once (a Dask cluster of
    that many processes, or the scheduler at ``dask_address``)."""

    task_runner: TaskRunnerName = TaskRunnerName.THREADS
    workers: int = 1
    dask_address: str | None = None

    def run(self, task: Task[..., Any], partitions: Sequence[dict[str, Any]]) -> list[Any]:
        return run_partitions(task, partitions, self.task_runner, self.workers, self.dask_address)
