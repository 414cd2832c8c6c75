"""Backfill's services on a real SQLite store: every format in, idempotent, rejects kept."""

from __future__ import annotations

import gzip
import json
import shutil
import tracemalloc
from datetime import timedelta
from pathlib import Path

from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.config import PromotionLimits
from mempipe.services.promote import promote_sessions
from tests import helpers

FIXTURE_TURNS = {
    "chatgpt_conversations.json": 8,
    "claude_conversations.json": 4,
    "openai_chat.jsonl": 7,
    "sharegpt.json": 7,
    "turns.csv": 4,
    "turns.jsonl": 4,
}


def ingest(store, path: Path, defaults, rejects: Path, batch_size: int = 5000):
    return helpers.ingest(store, path, defaults, rejects, run_id="run", batch_size=batch_size)


def test_every_format_backfills_completely_and_a_second_run_adds_nothing(
    store, fixtures, defaults, tmp_path
) -> None:
    rejects = tmp_path / "rejects.jsonl"
    for name, expected in FIXTURE_TURNS.items():
        first = ingest(store, fixtures / name, defaults, rejects)
        assert (first.turns_inserted, first.rejected) == (expected, 0), name
    for name, expected in FIXTURE_TURNS.items():
        again = ingest(store, fixtures / name, defaults, rejects)
        assert (again.turns_inserted, again.duplicates_skipped) == (0, expected), name
    assert store.stats().turns == sum(FIXTURE_TURNS.values())
    assert not rejects.exists()


def test_turns_keep_identity_source_location_and_message_ids(
    store, fixtures, defaults, tmp_path
) -> None:
    ingest(store, fixtures / "turns.jsonl", defaults, tmp_path / "r.jsonl")
    row = store._conn.execute(
        "SELECT org_id, project_id, user_id, session_id, turn_seq, message_id, metadata, "
        "source_path, source_line, run_id FROM turns WHERE message_id = 'm-1'"
    ).fetchall()[0]
    assert row == (
        "acme",
        "support",
        "u-1",
        "sess-a",
        0,
        "m-1",
        '{"engagement_id":"eng-alpha","tier":2}',
        str(fixtures / "turns.jsonl"),
        1,
        "run",
    )
    empty = store._conn.execute("SELECT metadata FROM turns WHERE message_id = 'm-2'").fetchall()
    assert empty == [(None,)], "an empty metadata dict means no slot"


def test_broken_lines_go_to_the_rejects_file_and_every_good_turn_goes_in(
    store, defaults, tmp_path
) -> None:
    archive = tmp_path / "broken.jsonl.gz"
    lines = [
        json.dumps({"session_id": "s", "role": "user", "content": f"good {i}"}) for i in range(50)
    ]
    lines[10] = '{"session_id": "s", "role": "user", "content": '
    lines[20] = json.dumps({"session_id": "s", "role": "robot", "content": "x"})
    archive.write_bytes(gzip.compress("\n".join(lines).encode()))
    rejects = tmp_path / "rejects.jsonl"
    summary = ingest(store, archive, defaults, rejects, batch_size=7)
    assert (summary.turns_inserted, summary.rejected) == (48, 2)
    listed = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert [(r["line"], r["reason"][:14]) for r in listed] == [
        (11, "not valid JSON"),
        (21, "unknown role '"),
    ]
    assert listed[1]["raw"] == lines[20]
    assert all(r["path"] == str(archive) for r in listed)


def test_a_conflicting_rerun_rejects_the_changed_turn_and_keeps_the_stored_one(
    store, defaults, tmp_path
) -> None:
    archive = tmp_path / "t.jsonl"
    archive.write_text('{"session_id": "s", "turn_seq": 0, "role": "user", "content": "v1"}\n')
    ingest(store, archive, defaults, tmp_path / "r1.jsonl")
    archive.write_text('{"session_id": "s", "turn_seq": 0, "role": "user", "content": "v2"}\n')
    summary = ingest(store, archive, defaults, tmp_path / "r2.jsonl")
    assert (summary.turns_inserted, summary.duplicates_skipped, summary.rejected) == (0, 0, 1)
    assert "conflict" in (tmp_path / "r2.jsonl").read_text()
    assert store._conn.execute("SELECT content FROM turns").fetchall() == [("v1",)]


def test_promotion_cuts_series_by_count_and_idle_time_and_never_duplicates(
    store, defaults, tmp_path
) -> None:
    archive = tmp_path / "long.jsonl"
    minutes = [0, 1, 2, 3, 4, 5, 6, 50, 51, 52]
    archive.write_text(
        "\n".join(
            json.dumps(
                {
                    "session_id": "long",
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"turn {i}",
                    "created_at": f"2024-03-01T10:{m:02d}:00Z"
                    if m < 60
                    else "2024-03-01T11:00:00Z",
                }
            )
            for i, m in enumerate(minutes)
        )
        + "\n"
    )
    ingest(store, archive, defaults, tmp_path / "r.jsonl")
    limits = PromotionLimits(max_messages=4, idle_period=timedelta(minutes=30))
    summary = promote_sessions(UnitOfWork(store), limits, ["semantic", "episodic"], run_id="run")
    assert summary.snapshots_created == 3
    assert summary.by_reason == {"max_messages": 1, "idle": 1, "end_of_archive": 1}
    rows = store._conn.execute(
        "SELECT first_turn_seq, last_turn_seq, cut_reason FROM snapshots ORDER BY 1"
    ).fetchall()
    assert rows == [
        (0, 3, "max_messages"),
        (4, 6, "idle"),
        (7, 9, "end_of_archive"),
    ]
    again = promote_sessions(UnitOfWork(store), limits, ["semantic", "episodic"], run_id="run2")
    assert again.snapshots_created == 0
    stats = store.stats()
    assert stats.unpromoted_turns == 0
    assert stats.snapshots["pending"] == 3
    assert stats.extraction == {"semantic": {"pending": 3}, "episodic": {"pending": 3}}


def test_turns_arriving_later_in_a_session_form_the_next_snapshot(
    store, defaults, tmp_path
) -> None:
    archive = tmp_path / "t.jsonl"
    archive.write_text(
        "".join(
            json.dumps({"session_id": "s", "turn_seq": i, "role": "user", "content": str(i)}) + "\n"
            for i in range(2)
        )
    )
    ingest(store, archive, defaults, tmp_path / "r.jsonl")
    promote_sessions(UnitOfWork(store), PromotionLimits(), [], run_id="a")
    archive.write_text(
        json.dumps({"session_id": "s", "turn_seq": 2, "role": "user", "content": "2"}) + "\n"
    )
    ingest(store, archive, defaults, tmp_path / "r.jsonl")
    promote_sessions(UnitOfWork(store), PromotionLimits(), [], run_id="b")
    rows = store._conn.execute(
        "SELECT first_turn_seq, last_turn_seq FROM snapshots ORDER BY 1"
    ).fetchall()
    assert rows == [(0, 1), (2, 2)]


def write_sharegpt_array(path: Path, conversations: int) -> None:
    template = json.loads((Path(__file__).parents[1] / "fixtures" / "sharegpt.json").read_text())[1]
    with path.open("w") as out:
        out.write("[")
        for i in range(conversations):
            out.write(("," if i else "") + json.dumps(dict(template, id=f"sg-{i}")))
        out.write("]")


def peak_while_ingesting(store_url: str, archive: Path, defaults, tmp_path: Path) -> int:
    from mempipe.adapters.store import open_store

    store = open_store(store_url, migrate=True)
    tracemalloc.start()
    summary = ingest(store, archive, defaults, tmp_path / "r.jsonl", batch_size=1000)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    store.close()
    assert summary.turns_inserted == summary.turns_read
    return peak


def test_a_json_array_export_streams_in_memory_that_does_not_grow_with_its_size(
    defaults, tmp_path
) -> None:
    small, large = tmp_path / "small.json", tmp_path / "large.json"
    write_sharegpt_array(small, 3_000)
    write_sharegpt_array(large, 12_000)
    small_peak = peak_while_ingesting(f"sqlite:///{tmp_path / 's.db'}", small, defaults, tmp_path)
    large_peak = peak_while_ingesting(f"sqlite:///{tmp_path / 'l.db'}", large, defaults, tmp_path)
    assert large.stat().st_size > 3.5 * small.stat().st_size
    assert large_peak < 1.3 * small_peak, (small_peak, large_peak)


def peak_per_file(store_url: str, folder: Path, files: int, defaults, tmp_path: Path) -> int:
    """The traced peak while one ingest task reads ``files`` two-turn files as one group."""
    from mempipe.adapters.store import open_store
    from mempipe.schemas.archive import IngestRequest
    from mempipe.services.backfill.ingest import ingest_files

    folder.mkdir()
    for n in range(files):
        turns = [
            {"session_id": f"s{n}", "turn_seq": i, "role": "user", "content": "hi"} for i in (0, 1)
        ]
        (folder / f"c{n:04d}.jsonl").write_text("".join(json.dumps(t) + "\n" for t in turns))
    requests = [
        IngestRequest(
            path=path, defaults=defaults, run_id="r", rejects_file=tmp_path / "rejects.jsonl"
        )
        for path in sorted(folder.iterdir())
    ]
    store = open_store(store_url, migrate=True)
    tracemalloc.start()
    summaries = ingest_files(UnitOfWork(store), requests)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    store.close()
    assert sum(s.turns_inserted for s in summaries) == 2 * files
    return peak


def test_a_group_of_tiny_files_holds_a_few_kilobytes_a_file_read_not_its_buffers(
    defaults, tmp_path
) -> None:
    """Each file's reading buffers (64 KiB each) go once it is read: a group of 2,000 files held
    them all until its end (150 MB). A first group pays for what a process reads once."""
    peak_per_file(f"sqlite:///{tmp_path / 'first.db'}", tmp_path / "first", 20, defaults, tmp_path)
    few = peak_per_file(
        f"sqlite:///{tmp_path / 'few.db'}", tmp_path / "few", 100, defaults, tmp_path
    )
    many = peak_per_file(
        f"sqlite:///{tmp_path / 'many.db'}", tmp_path / "many", 500, defaults, tmp_path
    )
    assert (many - few) / 400 < 24 * 1024, f"{(many - few) / 400:.0f} bytes a file (was 77 KB)"


def test_a_directory_of_mixed_archives_is_read_file_by_file(store, fixtures, tmp_path) -> None:
    from mempipe.archives import expand_paths

    folder = tmp_path / "exports"
    shutil.copytree(fixtures, folder)
    files = expand_paths([folder])
    assert len(files) == len(FIXTURE_TURNS)
