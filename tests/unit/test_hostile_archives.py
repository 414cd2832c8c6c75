"""Bounded input (issue 38): reading an archive, detection included, has limits on nesting depth,
record size and line length, each a reject naming its setting; a hostile record costs its own
reject and nothing else. Text in UTF-16 / UTF-32 is read; a NUL byte costs its line; a JSON
Lines file's first bad lines do not decide its format."""

from __future__ import annotations

import codecs
import json
import os
from pathlib import Path

import pytest

from mempipe.archives import ArchiveReader
from mempipe.archives.json_records import BrokenRecord, JsonRecord, iter_json_records
from mempipe.archives.limits import ArchiveLimits
from mempipe.archives.paths import expand_paths
from mempipe.archives.streams import open_raw, stream_of
from mempipe.errors import ArchiveError
from mempipe.schemas.archive import ArchiveFormat
from mempipe.schemas.identity import IdentityDefaults
from mempipe.schemas.reject import Reject
from mempipe.schemas.turn import Turn

SMALL = ArchiveLimits(max_depth=8, max_record_bytes=200_000, max_line_bytes=100_000)


def turn(seq: int, content: str = "I like tea") -> dict:
    return {
        "session_id": "s1",
        "turn_seq": seq,
        "role": "user",
        "content": f"{content} {seq}",
        "created_at": "2024-01-01T00:00:00Z",
    }


def jsonl(turns: list[dict]) -> str:
    return "".join(json.dumps(t) + "\n" for t in turns)


def read(path: Path, fmt: ArchiveFormat = ArchiveFormat.AUTO) -> tuple[list[Turn], list[Reject]]:
    items = list(ArchiveReader(path, fmt, IdentityDefaults(org_id="o", project_id="p")))
    return [i for i in items if isinstance(i, Turn)], [i for i in items if isinstance(i, Reject)]


def records(path: Path, limits: ArchiveLimits = SMALL) -> list[JsonRecord | BrokenRecord]:
    with open_raw(path) as raw:
        archive = stream_of(raw, path.stat().st_size)
        return list(
            iter_json_records(archive.stream, tell=lambda: archive.bytes_read, limits=limits)
        )


@pytest.mark.parametrize("depth", [40_000, 200_000])
def test_a_deeply_nested_array_is_one_reject_naming_the_depth_limit(tmp_path, depth) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * depth + "]" * depth)
    turns, rejects = read(path)
    assert turns == []
    assert len(rejects) == 1
    assert "nested deeper than 100 levels (MEMPIPE_ARCHIVE_MAX_DEPTH)" in rejects[0].reason


def test_records_before_a_too_deep_one_are_kept_and_the_reject_says_which(tmp_path) -> None:
    path = tmp_path / "array.json"
    deep = "[" * 20 + "]" * 20
    path.write_text(
        f"[{json.dumps(turn(0))}, {json.dumps(turn(1))}, {deep}, {json.dumps(turn(2))}]"
    )
    found = records(path)
    assert [r.value["turn_seq"] for r in found if isinstance(r, JsonRecord)] == [0, 1]
    (broken,) = [r for r in found if isinstance(r, BrokenRecord)]
    assert broken.fatal
    assert broken.index == 2
    assert "MEMPIPE_ARCHIVE_MAX_DEPTH" in broken.reason


def test_a_record_larger_than_the_limit_is_named_and_read_in_constant_memory(tmp_path) -> None:
    path = tmp_path / "big.json"
    huge = {"content": "x" * 1_000_000, "nested": [{"a": "y" * 10_000}] * 20}
    path.write_text(f"[{json.dumps(turn(0))}, {json.dumps(huge)}]")
    found = records(path)
    assert isinstance(found[0], JsonRecord)
    assert isinstance(found[1], BrokenRecord)
    assert "MEMPIPE_ARCHIVE_MAX_RECORD_BYTES" in found[1].reason


def test_strings_full_of_brackets_and_escapes_are_not_nesting(tmp_path) -> None:
    path = tmp_path / "tricky.json"
    tricky = [turn(i, 'he said "[[[[{{{{" and \\\\ then ]]]] \\" [' * 50) for i in range(300)]
    path.write_text(json.dumps(tricky))
    found = records(path)
    assert all(isinstance(r, JsonRecord) for r in found)
    assert len(found) == 300


def test_a_line_longer_than_the_limit_costs_only_that_line(tmp_path) -> None:
    path = tmp_path / "long.jsonl"
    long_line = json.dumps(turn(1, "z" * 300_000))
    path.write_text(jsonl([turn(0)]) + long_line + "\n" + jsonl([turn(2)]))
    found = records(path)
    kept = [r.value["turn_seq"] for r in found if isinstance(r, JsonRecord)]
    assert kept == [0, 2]
    (broken,) = [r for r in found if isinstance(r, BrokenRecord)]
    assert broken.line == 2
    assert "MEMPIPE_ARCHIVE_MAX_LINE_BYTES" in broken.reason
    assert len(broken.text) < 1000, "the reject keeps a preview, not the line"


def test_a_deep_json_line_costs_only_that_line(tmp_path) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text(jsonl([turn(0)]) + "[" * 50 + "]" * 50 + "\n" + jsonl([turn(1)]))
    found = records(path)
    assert [r.value["turn_seq"] for r in found if isinstance(r, JsonRecord)] == [0, 1]
    (broken,) = [r for r in found if isinstance(r, BrokenRecord)]
    assert broken.line == 2
    assert "MEMPIPE_ARCHIVE_MAX_DEPTH" in broken.reason


@pytest.mark.parametrize(
    ("encoding", "bom"),
    [
        ("utf-16-le", codecs.BOM_UTF16_LE),
        ("utf-16-be", codecs.BOM_UTF16_BE),
        ("utf-16-le", b""),
        ("utf-16-be", b""),
        ("utf-32-le", codecs.BOM_UTF32_LE),
        ("utf-32-be", b""),
    ],
)
def test_utf16_and_utf32_archives_are_read_with_or_without_a_bom(tmp_path, encoding, bom) -> None:
    path = tmp_path / "wide.jsonl"
    lines = [turn(i, "café ☕ naïve") for i in range(50)]
    path.write_bytes(bom + jsonl(lines).encode(encoding))
    turns, rejects = read(path)
    assert rejects == []
    assert [t.content for t in turns] == [f"café ☕ naïve {i}" for i in range(50)]


def test_a_nul_byte_costs_its_line_not_the_file(tmp_path) -> None:
    path = tmp_path / "nul.jsonl"
    lines = [json.dumps(turn(i)) for i in range(300)]
    lines[150] = lines[150].replace("I like", "I\x00like")
    path.write_text("\n".join(lines) + "\n")
    turns, rejects = read(path)
    assert len(turns) == 299
    assert [r.line for r in rejects] == [151]


def test_real_binary_data_is_still_refused_as_a_whole(tmp_path) -> None:
    path = tmp_path / "image.jsonl"
    path.write_bytes(bytes(range(256)) * 40)
    turns, rejects = read(path)
    assert turns == []
    assert len(rejects) == 1
    assert "binary data" in rejects[0].reason


def test_first_lines_that_are_not_objects_do_not_decide_the_format(tmp_path) -> None:
    path = tmp_path / "messy.jsonl"
    path.write_text('[1, 2]\n"a string"\n42\n{"unknown": "shape"}\n' + jsonl(map(turn, range(300))))
    turns, rejects = read(path)
    assert len(turns) == 300
    assert [r.line for r in rejects] == [1, 2, 3, 4]


def test_a_fifo_is_named_as_what_it_is(tmp_path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(ArchiveError, match="not a regular file"):
        expand_paths([fifo])


def test_a_lone_surrogate_escape_is_a_reject_however_the_chunks_fall(tmp_path) -> None:
    """The C JSON parser turns an unpaired ``\\ud800`` into ``?`` without a word: the record is
    a reject instead (issue 54), a pair (an emoji) and an escaped backslash stay text, and a
    chunk boundary inside an escape changes nothing."""
    import io

    from mempipe.archives.json_records import StructureGuard, unpaired_surrogates_marked
    from mempipe.archives.limits import ArchiveLimits

    body = (
        b'[{"t": "pair \\ud83d\\ude00"}, {"t": "lone \\ud800 here"}, '
        b'{"t": "low \\udc00"}, {"t": "slash \\\\ud800"}]'
    )
    for size in (1, 3, 7, 11, 64):
        stream = io.BytesIO(body)
        guard = StructureGuard(stream, ArchiveLimits(), 1)
        passed = b""
        while chunk := guard.read(size):
            passed += chunk
        assert len(passed) == len(body), size
        assert passed.count(b"\\uffff") == 2, size
        assert b"\\ud83d\\ude00" in passed, size
        assert b"\\\\ud800" in passed, size
    marked, held = unpaired_surrogates_marked(b'{"t": "a \\ud8', final=False)
    assert marked + held == b'{"t": "a \\ud8', "an escape the chunk cuts waits for the next"
    assert held.endswith(b"\\ud8")
    path = tmp_path / "export.json"
    path.write_bytes(
        b'[{"session_id": "s", "turn_seq": 0, "role": "user", "content": "lone \\ud800"},'
        b' {"session_id": "s", "turn_seq": 1, "role": "user", "content": "fine \\ud83d\\ude00"}]'
    )
    turns, rejects = read(path)
    assert [t.content for t in turns] == ["fine \U0001f600"]
    (reject,) = rejects
    assert "not valid Unicode text" in reject.reason
