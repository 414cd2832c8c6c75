"""Which files a backfill reads, and how their format is recognised."""

from __future__ import annotations

import pytest

from mempipe.archives import expand_paths
from mempipe.archives.detect import classify
from mempipe.archives.paths import logical_suffix
from mempipe.errors import ArchiveError
from mempipe.schemas.archive import ArchiveFormat


def test_directories_are_searched_recursively_for_archives(tmp_path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.jsonl").write_text("")
    (tmp_path / "a" / "y.json.gz").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("")
    found = expand_paths([tmp_path])
    assert [p.name for p in found] == ["x.jsonl", "y.json.gz"]


def test_a_directory_is_walked_as_sorted_rglob_walks_it_with_links_resolved(tmp_path) -> None:
    """The one-scandir walk finds what ``sorted(rglob)`` and ``resolve()`` found: the order of
    the paths' parts, a linked file as its target, a linked directory not descended."""
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    for folder in (root / "a" / "b", root / "a-c", elsewhere):
        folder.mkdir(parents=True)
    for path in (root / "a" / "b" / "x.jsonl", root / "a-c" / "y.CSV", root / "z.json.zst"):
        path.write_text("")
    (root / "a" / "notes.md").write_text("")
    (elsewhere / "far.jsonl").write_text("")
    (root / "link.jsonl").symlink_to(elsewhere / "far.jsonl")
    (root / "linked").symlink_to(elsewhere, target_is_directory=True)
    (root / "lost.jsonl").symlink_to(tmp_path / "missing.jsonl")

    as_rglob = [p.resolve() for p in sorted(root.rglob("*")) if p.is_file()]
    as_rglob = [p for p in as_rglob if logical_suffix(p) in {".jsonl", ".csv", ".json"}]
    assert expand_paths([root]) == as_rglob
    assert [p.name for p in as_rglob] == ["x.jsonl", "y.CSV", "far.jsonl", "z.json.zst"]


def test_globs_are_expanded_and_the_same_file_is_read_once(tmp_path) -> None:
    for name in ("b.csv", "a.csv"):
        (tmp_path / name).write_text("")
    found = expand_paths([str(tmp_path / "*.csv"), tmp_path / "a.csv"])
    assert [p.name for p in found] == ["a.csv", "b.csv"]


@pytest.mark.parametrize(
    ("given", "message"),
    [("missing.jsonl", "no such file"), ("*.nothing", "matches no archive"), ("empty", "holds no")],
)
def test_a_path_that_names_no_archive_is_a_clear_error(tmp_path, given, message) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ArchiveError, match=message):
        expand_paths([str(tmp_path / given)])


def test_the_logical_suffix_ignores_compression() -> None:
    from pathlib import Path

    assert logical_suffix(Path("a.JSONL.gz")) == ".jsonl"
    assert logical_suffix(Path("b.json.zst")) == ".json"


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({"mapping": {}, "current_node": "x", "title": "t"}, ArchiveFormat.CHATGPT),
        ({"uuid": "u", "chat_messages": []}, ArchiveFormat.CLAUDE),
        ({"id": "1", "conversations": []}, ArchiveFormat.SHAREGPT),
        ({"id": "1", "messages": []}, ArchiveFormat.OPENAI),
        ({"session_id": "s", "role": "user", "content": "x"}, ArchiveFormat.TURNS),
        ({"foo": 1}, None),
        (["not", "a", "record"], None),
    ],
)
def test_records_are_classified_by_their_keys(record, expected) -> None:
    assert classify(record) is expected


def test_every_format_is_in_the_registry_once_and_detection_reads_it() -> None:
    from mempipe.archives.registry import detected, format_names
    from mempipe.schemas.archive import ArchiveFormat

    assert sorted(format_names()) == sorted(ArchiveFormat), "no plug-in installed here"
    names = [parser.format for parser in detected()]
    assert len(names) == len(set(names)), "one parser per JSON format"
    assert names[-1] == ArchiveFormat.TURNS, "the loosest rule is tried last"


def test_every_input_format_is_one_kind_of_one_registry() -> None:
    """Transcripts, tables, memory exports and bundles: one protocol, one table, each format
    saying its own kind, suffixes and reading, so nothing branches on a format's name."""
    from mempipe.archives.registry import BUILT_IN, FormatKind, by_suffix, format_class, names
    from mempipe.schemas.archive import ArchiveFormat
    from mempipe.schemas.memory_import import MemoryFormat

    for name, (kind, _) in BUILT_IN.items():
        fmt = format_class(name)
        assert (fmt.format, fmt.kind) == (name, kind)
        assert callable(fmt(name).drafts)
    assert set(MemoryFormat) <= set(names(FormatKind.MEMORIES))
    assert names(FormatKind.BUNDLE) == ["bundle"]
    assert by_suffix(".tsv") is ArchiveFormat.CSV
    assert by_suffix(".parquet") is ArchiveFormat.PARQUET
    assert by_suffix(".jsonl") is None


def test_detecting_many_files_reads_the_installed_entry_points_once(tmp_path, monkeypatch) -> None:
    """The plug-in formats are read once per process, as the installed packages are: reading
    every distribution's entry points per file made a directory of 3,000 small files take ten
    times as long as its reading."""
    from mempipe import plugins
    from mempipe.archives import registry
    from mempipe.archives.detect import detect_format

    reads: list[str] = []
    real = plugins.entry_points

    def counted(**selection: str):
        reads.append(selection["group"])
        return real(**selection)

    for cached in (plugins.installed, registry._plugins):
        cached.cache_clear()
    monkeypatch.setattr(plugins, "entry_points", counted)
    for n in range(50):
        path = tmp_path / f"c{n}.jsonl"
        path.write_text('{"session_id": "s", "role": "user", "content": "hi"}\n')
        assert detect_format(path) == "turns"
    assert len(reads) <= 2, reads


def test_a_linked_file_named_directly_or_by_a_glob_is_read_as_its_target_once(tmp_path) -> None:
    (tmp_path / "real.jsonl").write_text("")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "real.jsonl")
    found = expand_paths([tmp_path / "link.jsonl", str(tmp_path / "*.jsonl")])
    assert found == [(tmp_path / "real.jsonl").resolve()]
