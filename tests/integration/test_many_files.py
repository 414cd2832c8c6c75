"""A directory of many small archives is read as one stream: each file is accounted, rejected
and reported exactly as when the files are ingested one at a time."""

from __future__ import annotations

import json
from pathlib import Path

from mempipe.adapters.store import open_store
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.archive import ArchiveFormat, IngestRequest
from mempipe.schemas.identity import IdentityDefaults
from mempipe.schemas.summaries import LISTED_FILES, PromotionSummary, UserCount
from mempipe.services.backfill.ingest import ingest_file, ingest_files
from mempipe.services.backfill.summary import artifact_rows, summarize_backfill, tally_files

DEFAULTS = IdentityDefaults(org_id="acme", project_id="support")


def write_folder(folder: Path) -> list[Path]:
    """Tiny conversations; one holds a bad record, one is cut off mid-record, one is empty, one
    repeats another's turns (duplicates), one changes a stored turn (a conflict)."""
    folder.mkdir()
    paths = []
    for n in range(40):
        turns = [
            {"session_id": f"s{n}", "turn_seq": 0, "role": "user", "content": f"hello {n}"},
            {"session_id": f"s{n}", "turn_seq": 1, "role": "assistant", "content": "hi"},
        ]
        path = folder / f"c{n:03d}.jsonl"
        path.write_text("".join(json.dumps(t) + "\n" for t in turns))
        paths.append(path)
    (folder / "c005.jsonl").write_text(
        (folder / "c005.jsonl").read_text() + '{"session_id": "s5", "role": "robot"}\n'
    )
    (folder / "c010.jsonl").write_text('{"session_id": "s10", "turn_seq": 0, "role": "us')
    (folder / "c011.jsonl").write_text("")
    (folder / "c012.jsonl").write_text((folder / "c013.jsonl").read_text())
    conflict = {"session_id": "s14", "turn_seq": 1, "role": "assistant", "content": "changed"}
    (folder / "c015.jsonl").write_text(json.dumps(conflict) + "\n")
    return paths


def requests(paths: list[Path], rejects: Path) -> list[IngestRequest]:
    return [
        IngestRequest(
            path=p, format=ArchiveFormat.AUTO, defaults=DEFAULTS, run_id="r", rejects_file=rejects
        )
        for p in paths
    ]


def test_a_stream_of_files_accounts_each_file_as_one_by_one_ingests_do(tmp_path) -> None:
    paths = write_folder(tmp_path / "archive")
    one_by_one = open_store(f"sqlite:///{tmp_path / 'one.db'}", migrate=True)
    streamed = open_store(f"sqlite:///{tmp_path / 'stream.db'}", migrate=True)
    singles = [
        ingest_file(UnitOfWork(one_by_one), r) for r in requests(paths, tmp_path / "one.jsonl")
    ]
    together = ingest_files(UnitOfWork(streamed), requests(paths, tmp_path / "stream.jsonl"))

    assert [s.model_dump() for s in together] == [s.model_dump() for s in singles]
    by_file = {Path(s.path).name: s for s in together}
    assert by_file["c005.jsonl"].rejected == 1
    assert by_file["c010.jsonl"].failed is not None
    assert by_file["c012.jsonl"].duplicates_skipped == 0, "its own session s13 is new here"
    assert by_file["c013.jsonl"].duplicates_skipped == 2, "c012 stored s13's turns first"
    assert by_file["c015.jsonl"].rejected == 1, "a changed turn is a conflict"

    def rejects(name: str) -> list[tuple[str, int | None, str]]:
        lines = (tmp_path / name).read_text().splitlines()
        return [(r["path"], r["line"], r["reason"]) for r in map(json.loads, lines)]

    assert rejects("stream.jsonl") == rejects("one.jsonl")
    assert one_by_one.stats().turns == streamed.stats().turns
    one_by_one.close()
    streamed.close()


def test_a_run_of_many_files_lists_those_worth_a_look_and_sums_the_rest(tmp_path) -> None:
    """The flow's result stays small however many files were read (Prefect walks it): past
    LISTED_FILES it names the files with rejects or a failure, and its sums are still exact."""
    store = open_store(f"sqlite:///{tmp_path / 'm.db'}", migrate=True)
    paths = write_folder(tmp_path / "archive")
    extra = []
    for n in range(LISTED_FILES):
        path = tmp_path / "archive" / f"x{n:03d}.jsonl"
        path.write_text(json.dumps({"session_id": f"x{n}", "role": "user", "content": "x"}))
        extra.append(path)
    files = ingest_files(UnitOfWork(store), requests(paths + extra, tmp_path / "r.jsonl"))
    halves = [tally_files(files[:70]), tally_files(files[70:])]
    summary = summarize_backfill("r", "s", halves, PromotionSummary(), tmp_path / "r.jsonl", 0)

    assert summary.files_read == len(files) == 40 + LISTED_FILES
    noted = {"c005.jsonl", "c010.jsonl", "c011.jsonl", "c015.jsonl"}
    assert {Path(f.path).name for f in summary.files} == noted
    assert summary.failed_files == [str(paths[10]), str(paths[11])], "cut off; empty"
    for count in ("turns_read", "turns_inserted", "duplicates_skipped", "rejected"):
        assert getattr(summary, count) == sum(getattr(f, count) for f in files), count
    assert summary.users == UserCount.summed(f.users for f in files)
    rows = artifact_rows(summary)
    others = rows[-1]
    assert others["path"] == f"the other {len(files) - 4} files"
    assert others["turns_inserted"] == sum(
        f.turns_inserted for f in files if Path(f.path).name not in noted
    )
    few = summarize_backfill(
        "r", "s", [tally_files(files[:LISTED_FILES])], PromotionSummary(), tmp_path / "r.jsonl", 0
    )
    assert few.files == files[:LISTED_FILES], "a run of few files lists every one"
    assert len(artifact_rows(few)) == LISTED_FILES
    store.close()


def test_an_erased_users_files_in_a_shared_write_are_counted_erased_file_by_file(
    tmp_path, monkeypatch
) -> None:
    """Files of several users written in one statement: each file's inserted, duplicate and
    erased turns as when each file is written alone, the erased user's dropped by the fence."""
    from datetime import UTC, datetime, timedelta

    from mempipe.adapters.store import writer_epoch
    from mempipe.schemas.bundle import BundleSelection

    folder = tmp_path / "archive"
    folder.mkdir()
    paths = []
    for n in range(9):
        user = f"u{n % 3}"
        turns = [
            {
                "session_id": f"s{n}",
                "turn_seq": seq,
                "role": role,
                "content": f"{user} {n}",
                "user_id": user,
            }
            for seq, role in enumerate(("user", "assistant"))
        ]
        paths.append(folder / f"c{n}.jsonl")
        paths[-1].write_text("".join(json.dumps(t) + "\n" for t in turns))
    monkeypatch.setattr(writer_epoch, "PROCESS_STARTED", datetime.now(UTC) - timedelta(seconds=5))
    stores = []
    for name in ("one", "stream"):
        store = open_store(f"sqlite:///{tmp_path / f'{name}.db'}", migrate=True)
        ingest_file(UnitOfWork(store), requests(paths[:3], tmp_path / "first.jsonl")[0])
        store.erase_user(BundleSelection(user_id="u1"), dry_run=False)
        stores.append(store)
    one = [ingest_file(UnitOfWork(stores[0]), r) for r in requests(paths, tmp_path / "o.jsonl")]
    together = ingest_files(UnitOfWork(stores[1]), requests(paths, tmp_path / "s.jsonl"))

    assert [s.model_dump() for s in together] == [s.model_dump() for s in one]
    assert [(s.turns_inserted, s.duplicates_skipped, s.skipped_erased) for s in together] == [
        (0, 2, 0) if n == 0 else (0, 0, 2) if n % 3 == 1 else (2, 0, 0) for n in range(9)
    ]
    for store in stores:
        store.close()
