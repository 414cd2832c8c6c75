"""How work is cut for scale-out: replay by project then owner-id ranges, re-embed by record-id
ranges."""

from __future__ import annotations

from mempipe.domain.partitioning import partition
from mempipe.schemas.work import WorkItem
from mempipe.services.reembed.fill import id_ranges


def work(project: str, user: str, n: int) -> list[WorkItem]:
    return [
        WorkItem(
            snapshot_id=f"{project}-{user}-{i}",
            handler="semantic",
            org_id="o",
            project_id=project,
            user_id=user,
        )
        for i in range(n)
    ]


def test_an_owner_is_never_split_and_keeps_its_order() -> None:
    items = work("p", "a", 5) + work("p", "b", 5) + work("q", "c", 10)
    parts = partition(items, 3)
    assert len(parts) <= 3
    assert sorted(i.snapshot_id for p in parts for i in p) == sorted(i.snapshot_id for i in items)
    for part in parts:
        for owner in {i.user_id for i in part}:
            mine = [i.snapshot_id for i in part if i.user_id == owner]
            everywhere = [i.snapshot_id for p in parts for i in p if i.user_id == owner]
            assert mine == everywhere, "all of an owner's work is in one partition, in order"


def test_projects_are_cut_into_ranges_in_proportion_to_their_work() -> None:
    items = [w for u in "abcdefgh" for w in work("big", u, 3)] + work("small", "z", 2)
    parts = partition(items, 4)
    assert len(parts) == 4
    assert max(map(len, parts)) - min(map(len, parts)) <= 4
    everyone = list("abcdefgh")
    for part in parts:
        users = sorted({i.user_id for i in part if i.project_id == "big"})
        first = everyone.index(users[0])
        assert users == everyone[first : first + len(users)], "a contiguous range of owner ids"


def test_id_ranges_cover_every_id_once_and_leave_the_last_open() -> None:
    ranges = id_ranges((1, 1000), 4)
    assert ranges == [(0, 250), (250, 500), (500, 750), (750, None)]
    assert id_ranges((5, 6), 4) == [(4, 5), (5, None)]
    assert id_ranges(None, 4) == [(0, None)]
    assert id_ranges((1, 1000), 1) == [(0, None)]
