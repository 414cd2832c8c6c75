"""Bad input never stops a file: each bad record becomes a reject with location, reason, raw."""

from __future__ import annotations

from pathlib import Path

from mempipe.archives import ArchiveReader
from mempipe.schemas.archive import ArchiveFormat
from mempipe.schemas.identity import IdentityDefaults
from mempipe.schemas.reject import Reject
from mempipe.schemas.turn import Turn

BROKEN = "\n".join(
    [
        '{"session_id": "s", "role": "user", "content": "good 1", "created_at": "2024-01-01"}',
        "{not json at all",
        '{"session_id": "s", "role": "wizard", "content": "unknown role"}',
        '{"session_id": "s", "content": "no role"}',
        '{"session_id": "s", "role": "user", "content": 42}',
        '{"session_id": "s", "role": "user", "content": "bad time", "created_at": "yesterday"}',
        '{"role": "user", "content": "no session"}',
        '["not", "an", "object"]',
        '{"session_id": "s", "role": "assistant", "content": "good 2", "extra": 1}',
        "",
        '{"session_id": "s", "role": "assistant", "content": "good 3"}',
    ]
)


def read(path: Path, fmt: ArchiveFormat = ArchiveFormat.TURNS):
    items = list(ArchiveReader(path, fmt, IdentityDefaults(org_id="o", project_id="p")))
    return [i for i in items if isinstance(i, Turn)], [i for i in items if isinstance(i, Reject)]


def test_every_good_turn_is_kept_and_every_broken_one_is_listed_with_its_reason(tmp_path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text(BROKEN + "\n")
    turns, rejects = read(path)
    assert [t.content for t in turns] == ["good 1", "good 3"]
    by_line = {r.line: r.reason for r in rejects}
    assert by_line.keys() == {2, 3, 4, 5, 6, 7, 8, 9}
    assert by_line[2].startswith("not valid JSON")
    assert by_line[3] == "unknown role 'wizard'"
    assert by_line[4] == "missing role"
    assert by_line[5] == "content: Input should be a valid string"
    assert by_line[6].startswith("created_at: Input should be a valid datetime")
    assert by_line[7] == "session_id: Field required"
    assert by_line[8] == "expected a JSON object holding one turn"
    assert by_line[9] == "unknown field(s): extra"
    assert all(r.path == str(path) for r in rejects)
    assert {r.line: r.raw for r in rejects}[2] == "{not json at all"


def test_rejected_records_keep_their_place_in_the_session(tmp_path) -> None:
    """A repaired record re-run later takes the seq it would have had; nothing shifts."""
    path = tmp_path / "broken.jsonl"
    path.write_text(BROKEN + "\n")
    turns, _ = read(path)
    # session "s" has seven records (lines 1, 3, 4, 5, 6, 9, 11): the last good one is seq 6
    assert [t.turn_seq for t in turns] == [0, 6]


def test_a_json_lines_file_with_a_broken_first_line_keeps_the_rest(tmp_path) -> None:
    path = tmp_path / "first-broken.jsonl"
    path.write_text(
        '{"session_id": "s", "role": \n{"session_id": "s", "role": "user", "content": "ok"}\n'
    )
    turns, rejects = read(path)
    assert [t.content for t in turns] == ["ok"]
    assert [r.line for r in rejects] == [1]


def test_a_truncated_json_array_keeps_the_records_before_the_damage(tmp_path) -> None:
    path = tmp_path / "truncated.json"
    path.write_text(
        '[{"id": "a", "messages": [{"role": "user", "content": "kept"}]},'
        ' {"id": "b", "messages": [{"role": "user", "content": "lo'
    )
    turns, rejects = read(path, ArchiveFormat.AUTO)
    assert [t.content for t in turns] == ["kept"]
    assert len(rejects) == 1
    assert rejects[0].index == 1
    assert rejects[0].whole_file
    assert f"truncated at byte {path.stat().st_size}" in rejects[0].reason


def test_a_json_array_broken_in_the_middle_is_malformed_not_truncated(tmp_path) -> None:
    path = tmp_path / "broken.json"
    path.write_text(
        '[{"id": "a", "messages": [{"role": "user", "content": "kept"}]},'
        ' {"id": "b", "messages": [oops]}, {"id": "c", "messages": []}]'
    )
    turns, rejects = read(path, ArchiveFormat.AUTO)
    assert [t.content for t in turns] == ["kept"]
    assert len(rejects) == 1
    assert rejects[0].whole_file
    assert "malformed from record 1" in rejects[0].reason


def test_a_bad_message_inside_a_conversation_is_located_by_record_and_message(tmp_path) -> None:
    path = tmp_path / "conv.jsonl"
    path.write_text(
        '{"id": "c", "messages": [{"role": "user", "content": "hi"},'
        ' {"role": "narrator", "content": "?"}, {"role": "assistant", "content": "yo"}]}\n'
    )
    turns, (bad,) = read(path, ArchiveFormat.OPENAI)
    assert [(t.turn_seq, t.content) for t in turns] == [(0, "hi"), (2, "yo")]
    assert (bad.line, bad.message_index, bad.reason) == (1, 1, "unknown role 'narrator'")
    assert bad.raw == '{"role":"narrator","content":"?"}'


def test_an_undetectable_file_is_one_reject_not_an_error(tmp_path) -> None:
    path = tmp_path / "mystery.json"
    path.write_text('[{"foo": 1}]')
    turns, rejects = read(path, ArchiveFormat.AUTO)
    assert turns == []
    assert len(rejects) == 1
    assert "cannot tell the format" in rejects[0].reason
