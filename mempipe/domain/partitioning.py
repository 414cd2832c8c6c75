"""How work is cut into partitions that can run side by side: replay's by owner (an owner's work
is never split: it runs in time order, in one partition), a backfill's by archive file."""

from __future__ import annotations

from mempipe.schemas.work import WorkItem

Owner = tuple[str, str, str]


def owners_of(items: list[WorkItem]) -> dict[Owner, list[WorkItem]]:
    """Each owner's items, in the order given (time order)."""
    owners: dict[Owner, list[WorkItem]] = {}
    for item in items:
        owners.setdefault(item.partition, []).append(item)
    return owners


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


def file_groups(
    files: list[tuple[str, int]], max_files: int, max_bytes: int, spread: int = 1
) -> list[list[str]]:
    """Archive files, in the order given, cut into groups of at most ``max_files`` files and
    about ``max_bytes`` bytes (a file larger than that is a group of its own): each group is one
    ingest task, so a directory of many small files is a few tasks, not one per file. ``spread``:
    the workers that read at once; the files are cut finer, into at least that many groups where
    there are that many files, so that every worker has a share."""
    if spread > 1 and files:
        max_files = min(max_files, -(-len(files) // spread))
        max_bytes = min(max_bytes, -(-sum(size for _, size in files) // spread))
    groups: list[list[str]] = []
    current: list[str] = []
    held = 0
    for path, size in files:
        if current and (len(current) >= max_files or held + size > max_bytes):
            groups.append(current)
            current, held = [], 0
        current.append(path)
        held += size
    if current:
        groups.append(current)
    return groups
