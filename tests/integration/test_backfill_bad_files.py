"""Backfill accounts for every byte: leading garbage, corrupt and truncated files, empty
messages. A file that cannot be read to the end is one reject with its offset, the other files
go on, what was loaded is promoted, and the run fails (exit 1) naming the file."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import orjson
import pytest

from mempipe.adapters.store import open_store
from mempipe.errors import IncompleteRunError
from mempipe.schemas.run import RunStatus
from mempipe.schemas.summaries import BackfillSummary
from tests.stores import run_backfill

pytestmark = pytest.mark.prefect


def turn_lines(session: str, count: int, user: str = "maya") -> list[str]:
    return [
        json.dumps(
            {
                "session_id": session,
                "turn_seq": seq,
                "role": "user" if seq % 2 == 0 else "assistant",
                "content": f"{session} message {seq}: the weather in Lisbon is mild",
                "created_at": f"2024-06-01T10:{seq // 60:02d}:{seq % 60:02d}Z",
                "user_id": user,
            }
        )
        for seq in range(count)
    ]


def write_gzip(path: Path, lines: list[str], keep: float = 1.0) -> None:
    data = gzip.compress(("\n".join(lines) + "\n").encode())
    path.write_bytes(data[: int(len(data) * keep)])


def accounted(summary: BackfillSummary) -> None:
    for f in summary.files:
        assert f.turns_read == (
            f.turns_inserted + f.duplicates_skipped + f.rejected + f.skipped_empty
        ), f
    assert summary.turns_read == sum(f.turns_read for f in summary.files)


def run(paths: list[Path], store_url: str, tmp_path: Path) -> tuple[BackfillSummary, bool]:
    try:
        summary = run_backfill(None, store_url, paths, tmp_path)
    except IncompleteRunError as exc:
        incomplete: BackfillSummary = exc.summary  # type: ignore[assignment]
        return incomplete, False
    return summary, True


def rejects(summary: BackfillSummary) -> list[dict]:
    assert summary.rejects_path is not None
    return [orjson.loads(line) for line in Path(summary.rejects_path).read_bytes().splitlines()]


def test_jsonl_with_unparseable_first_lines_keeps_every_valid_line(
    prefect_server, store_url, tmp_path
) -> None:
    archive = tmp_path / "in" / "lead.jsonl"
    archive.parent.mkdir()
    archive.write_text("garbage\n{broken\n" + "\n".join(turn_lines("s1", 30)) + "\n")
    summary, complete = run([archive], store_url, tmp_path)
    assert complete
    assert (summary.turns_inserted, summary.rejected, summary.turns_read) == (30, 2, 32)
    assert [r["line"] for r in rejects(summary)] == [1, 2]
    accounted(summary)


def test_the_same_lines_without_the_jsonl_suffix_are_still_read_line_by_line(
    prefect_server, store_url, tmp_path
) -> None:
    archive = tmp_path / "lead.json"
    archive.write_text("not json at all\n" + "\n".join(turn_lines("s1", 12)) + "\n")
    summary, complete = run([archive], store_url, tmp_path)
    assert complete
    assert (summary.turns_inserted, summary.rejected) == (12, 1)


@pytest.mark.parametrize("corrupt_name", ["a_first.jsonl.gz", "z_last.jsonl.gz"])
def test_a_corrupt_gzip_among_good_files_fails_the_run_and_loses_nothing_else(
    prefect_server, store_url, tmp_path, corrupt_name
) -> None:
    folder = tmp_path / "archives"
    folder.mkdir()
    (folder / "m_good.jsonl").write_text("\n".join(turn_lines("good-1", 20)) + "\n")
    write_gzip(folder / "n_good.jsonl.gz", turn_lines("good-2", 20))
    write_gzip(folder / corrupt_name, turn_lines("broken", 3000), keep=0.5)

    summary, complete = run([folder], store_url, tmp_path)

    assert not complete, "a file that could not be read to the end fails the run"
    corrupt = str((folder / corrupt_name).resolve())
    assert summary.failed_files == [corrupt]
    by_path = {f.path: f for f in summary.files}
    assert by_path[str((folder / "m_good.jsonl").resolve())].turns_inserted == 20
    assert by_path[str((folder / "n_good.jsonl.gz").resolve())].turns_inserted == 20
    broken = by_path[corrupt]
    assert 0 < broken.turns_inserted < 3000, "the turns before the damage are kept"
    [whole] = [r for r in rejects(summary) if r["whole_file"]]
    assert whole["path"] == corrupt
    assert "truncated" in whole["reason"]
    assert whole["offset"] == (folder / corrupt_name).stat().st_size
    accounted(summary)

    store = open_store(store_url, migrate=True)
    try:
        stats = store.stats()
        assert stats.turns == 40 + broken.turns_inserted
        assert stats.unpromoted_turns == 0, "what was loaded is promoted"
        run_record = store.get_run(summary.run_id)
        assert run_record is not None
        assert run_record.status is RunStatus.FAILED
        assert corrupt in (run_record.error or "")
        assert run_record.counts["turns_inserted"] == summary.turns_inserted
    finally:
        store.close()


def test_a_truncated_export_says_truncated_at_its_size_not_unknown_format(
    prefect_server, store_url, fixtures, tmp_path
) -> None:
    conversations = orjson.loads((fixtures / "chatgpt_conversations.json").read_bytes())
    whole = orjson.dumps(conversations * 20)
    archive = tmp_path / "conversations.json"
    archive.write_bytes(whole[: len(whole) // 2])

    summary, complete = run([archive], store_url, tmp_path)

    assert not complete
    [failed] = summary.files
    assert failed.failed is not None
    assert f"truncated at byte {len(whole) // 2}" in failed.failed
    assert failed.format == "chatgpt"
    assert failed.turns_inserted > 0
    accounted(summary)


def test_a_file_truncated_inside_its_first_record_is_named_truncated(
    prefect_server, store_url, fixtures, tmp_path
) -> None:
    archive = tmp_path / "conversations.json"
    archive.write_bytes((fixtures / "chatgpt_conversations.json").read_bytes()[:300])
    summary, complete = run([archive], store_url, tmp_path)
    assert not complete
    assert "truncated at byte 300" in (summary.files[0].failed or "")
    assert "cannot tell the format" not in (summary.files[0].failed or "")


def test_an_empty_file_is_a_failed_file(prefect_server, store_url, tmp_path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(turn_lines("s1", 4)) + "\n")
    summary, complete = run([empty, good], store_url, tmp_path)
    assert not complete
    assert summary.failed_files == [str(empty.resolve())]
    assert summary.turns_inserted == 4


def test_hidden_chatgpt_messages_are_counted_as_skipped(
    prefect_server, store_url, fixtures, tmp_path
) -> None:
    summary, complete = run([fixtures / "chatgpt_conversations.json"], store_url, tmp_path)
    assert complete
    assert summary.skipped_empty > 0, "the fixture holds hidden context and empty nodes"
    accounted(summary)


def test_two_users_archives_reusing_session_ids_are_both_loaded_whole(
    prefect_server, store_url, tmp_path
) -> None:
    maya = tmp_path / "maya.jsonl"
    maya.write_text("\n".join(turn_lines("support-118", 6, user="maya")) + "\n")
    bob = tmp_path / "bob.jsonl"
    bob.write_text(
        "\n".join(
            line.replace("weather in Lisbon", "rain in Oslo")
            for line in turn_lines("support-118", 4, user="bob")
        )
        + "\n"
    )
    summary, complete = run([maya, bob], store_url, tmp_path)
    assert complete
    assert (summary.turns_inserted, summary.duplicates_skipped, summary.rejected) == (10, 0, 0)
    assert summary.sessions == 2
    again, _ = run([maya, bob], store_url, tmp_path)
    assert (again.turns_inserted, again.duplicates_skipped, again.rejected) == (0, 10, 0)
    store = open_store(store_url, migrate=True)
    try:
        assert store.stats().sessions == 2
    finally:
        store.close()


@pytest.mark.parametrize("name", ["photo.jsonl", "photo.json", "photo.csv"])
def test_a_binary_file_is_one_whole_file_reject_not_a_line_per_chunk(
    prefect_server, store_url, tmp_path, name
) -> None:
    binary = tmp_path / name
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 40)
    summary, complete = run([binary], store_url, tmp_path)
    assert not complete
    [whole] = rejects(summary)
    assert whole["whole_file"]
    assert "binary data" in whole["reason"]
    assert summary.rejected == 1
