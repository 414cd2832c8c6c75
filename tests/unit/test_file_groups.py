"""Archive files cut into ingest tasks: by count and by bytes, in the order given."""

from __future__ import annotations

from mempipe.domain.partitioning import file_groups


def test_files_are_grouped_by_count_and_bytes_in_order() -> None:
    files = [(f"f{n}", 10) for n in range(7)]
    assert file_groups(files, max_files=3, max_bytes=1000) == [
        ["f0", "f1", "f2"],
        ["f3", "f4", "f5"],
        ["f6"],
    ]
    assert file_groups(files, max_files=100, max_bytes=25) == [
        ["f0", "f1"],
        ["f2", "f3"],
        ["f4", "f5"],
        ["f6"],
    ]


def test_a_file_larger_than_a_group_is_a_group_of_its_own() -> None:
    files = [("small", 1), ("huge", 500), ("after", 1)]
    assert file_groups(files, max_files=10, max_bytes=100) == [["small"], ["huge"], ["after"]]
    assert file_groups([], max_files=10, max_bytes=100) == []
