"""Per owner, an older snapshot never overwrites a newer current fact: older history that
arrives after newer snapshots were applied (a late backfill, a retried older extraction) is
reconciled as history: kept as a superseded version, audited as such, the current fact kept."""

from __future__ import annotations

import json
from pathlib import Path

from mempipe.adapters.embedding.hashing import HashingEmbedder
from mempipe.adapters.llm.offline import OfflineExtractor
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.schemas.work import WorkQuery
from mempipe.services.replay.extract import ReplayContext, replay_one
from tests.helpers import MONTHS, airport, write_archive
from tests.stores import load

USER = 7


def month_files(tmp_path: Path) -> list[Path]:
    whole = tmp_path / "all.jsonl"
    write_archive(whole, USER + 1)
    lines = [json.loads(line) for line in whole.read_text().splitlines()]
    files = []
    for month in range(MONTHS):
        path = tmp_path / f"month-{month}.jsonl"
        path.write_text(
            "".join(
                json.dumps(line) + "\n"
                for line in lines
                if line["session_id"] == f"u{USER:03d}-m{month}"
            )
        )
        files.append(path)
    return files


def replay_pending(store) -> None:
    context = ReplayContext(run_id="r", extractor=OfflineExtractor(), embedder=HashingEmbedder(64))
    for item in store.extraction_work(WorkQuery(handlers=["semantic"])):
        assert replay_one(UnitOfWork(store), item, context).status == "done"


def airports(store, status: str) -> list[str]:
    return sorted(
        text.rsplit(" ", 1)[-1].rstrip(".")
        for (text,) in store._rows(
            "SELECT text FROM memories_semantic WHERE status = ? AND text LIKE '%home airport%'",
            (status,),
        )
    )


def test_older_history_backfilled_after_newer_snapshots_is_kept_as_history(store, tmp_path) -> None:
    files = month_files(tmp_path)
    load(store, tmp_path, files[-1], user=f"user{USER:03d}")
    replay_pending(store)
    assert airports(store, "active") == [airport(USER, MONTHS - 1)]

    for older in files[:-1]:
        load(store, tmp_path, older, user=f"user{USER:03d}")
    replay_pending(store)

    assert airports(store, "active") == [airport(USER, MONTHS - 1)], "June's fact stays current"
    history = airports(store, "superseded")
    assert sorted(history) == sorted(airport(USER, m) for m in range(MONTHS - 1))
    rows = [r for r in store.audit_rows() if "home airport" in r.text]
    late = [r for r in rows if r.text != f"User's home airport is {airport(USER, MONTHS - 1)}."]
    assert late
    assert all(r.as_history and r.action == "ADD" for r in late), "audited as history"
    assert not any(r.action == "UPDATE" for r in rows), "nothing newer was superseded"


def test_in_time_order_the_same_facts_update_as_usual(store, tmp_path) -> None:
    for month_file in month_files(tmp_path):
        load(store, tmp_path, month_file, user=f"user{USER:03d}")
    replay_pending(store)
    assert airports(store, "active") == [airport(USER, MONTHS - 1)]
    rows = [r for r in store.audit_rows() if "home airport" in r.text]
    assert not any(r.as_history for r in rows)
    assert sum(r.action == "UPDATE" for r in rows) >= 1
