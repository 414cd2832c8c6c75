"""Find the archive files paths name, in groups: what a backfill and an import read."""

from __future__ import annotations

from prefect import get_run_logger

from mempipe.archives import expand_paths
from mempipe.domain.partitioning import file_groups
from mempipe.tasks.policies import step

GROUP_FILES = 2000
GROUP_BYTES = 64 * 1024 * 1024
"""An ingest task reads at most this many files, or about this many bytes: a directory of many
small files is a few tasks (each a Prefect task run and its state round trips), not one a file."""


@step("resolve-archives")
def resolve_archives(paths: list[str], spread: int = 1) -> list[list[str]]:
    """The archive files the paths name, in groups: one ingest task each (at least ``spread``
    groups where there are that many files, for that many workers)."""
    files = [(str(p), p.stat().st_size) for p in expand_paths(paths)]
    groups = file_groups(files, GROUP_FILES, GROUP_BYTES, spread)
    get_run_logger().info("found %d archive file(s), read in %d task(s)", len(files), len(groups))
    return groups
