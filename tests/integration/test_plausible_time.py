"""DESIGN rule (plausible time): a turn time before 1970 or more than the future margin after
the run is a reject with its reason, unless any time is allowed; the backfill flow applies it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from mempipe.schemas.archive import ArchiveFormat, TimeWindow
from tests.helpers import ingest

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TIMES = {
    "ok": "2024-06-01T10:00:00Z",
    "tomorrow-ish": "2026-12-02T11:00:00Z",
    "far-future": "9999-01-01T00:00:00Z",
    "next-week": "2026-12-08T00:00:00Z",
    "year-one": "0001-01-01T00:00:00Z",
    "pre-1970": "1969-12-31T23:59:59Z",
}


def archive(tmp_path):
    path = tmp_path / "turns.jsonl"
    path.write_text(
        "".join(
            json.dumps({"session_id": name, "role": "user", "content": name, "created_at": at})
            + "\n"
            for name, at in TIMES.items()
        )
    )
    return path


def test_implausible_times_are_rejects_with_their_reason(store, tmp_path, defaults) -> None:
    rejects = tmp_path / "rejects.jsonl"
    summary = ingest(
        store,
        archive(tmp_path),
        defaults,
        rejects,
        format=ArchiveFormat.TURNS,
        times=TimeWindow.around(NOW),
    )
    assert summary.turns_inserted == 2, "ok and tomorrow-ish, within the day's margin"
    reasons = {
        json.loads(json.loads(line)["raw"])["session_id"]: json.loads(line)["reason"]
        for line in rejects.read_text().splitlines()
    }
    assert set(reasons) == {"far-future", "next-week", "year-one", "pre-1970"}
    assert "before 1970" in reasons["pre-1970"]
    assert "more than the future margin" in reasons["far-future"]
    assert all("--allow-any-time" in r for r in reasons.values())


@pytest.mark.parametrize(("margin", "inserted"), [(timedelta(days=7), 3), (timedelta(0), 1)])
def test_the_margin_is_configurable(store, tmp_path, defaults, margin, inserted) -> None:
    summary = ingest(
        store,
        archive(tmp_path),
        defaults,
        tmp_path / "r.jsonl",
        format=ArchiveFormat.TURNS,
        times=TimeWindow.around(NOW, margin),
    )
    assert summary.turns_inserted == inserted


def test_without_a_window_any_time_is_taken(store, tmp_path, defaults) -> None:
    summary = ingest(
        store,
        archive(tmp_path),
        defaults,
        tmp_path / "r.jsonl",
        format=ArchiveFormat.TURNS,
        times=None,
    )
    assert summary.turns_inserted == len(TIMES)


@pytest.mark.prefect
def test_the_backfill_flow_rejects_them_unless_any_time_is_allowed(store_url, tmp_path) -> None:
    from mempipe.flows.backfill import backfill_flow

    path = tmp_path / "turns.jsonl"
    times = [TIMES["ok"], TIMES["far-future"], TIMES["pre-1970"]]
    path.write_text(
        "".join(
            json.dumps({"session_id": f"s{n}", "role": "user", "content": "x", "created_at": at})
            + "\n"
            for n, at in enumerate(times)
        )
    )
    strict = backfill_flow(paths=[str(path)], store=store_url, rejects_dir=str(tmp_path / "a"))
    assert (strict.turns_inserted, strict.rejected) == (1, 2)
    loose = backfill_flow(
        paths=[str(path)], store=store_url, rejects_dir=str(tmp_path / "b"), allow_any_time=True
    )
    assert (loose.turns_inserted, loose.duplicates_skipped) == (2, 1)
