"""An erase is final (DESIGN rule): once it commits, no work that began before it writes
anything of that owner again, whichever connection or process writes, in the writer's own
transaction; work begun after the erase (a new, explicit import) writes as usual.

The fence is SQLite triggers (migration 0017) over every table holding an owner's text, checked
against when the writing work began; the replay also checks it inside its write transaction, so
it reports the extraction as erased meanwhile rather than written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest

from mempipe.adapters.store import open_store
from mempipe.adapters.store import writer_epoch as epochs
from mempipe.adapters.store.writer_epoch import fence_time
from mempipe.schemas.archive import ArchiveFormat
from mempipe.schemas.bundle import BundleSelection
from mempipe.schemas.identity import IdentityDefaults
from tests.helpers import ingest, write_archive

DEFAULTS = IdentityDefaults(org_id="acme", project_id="travel")


def load(store, folder: Path, run_id: str):
    return ingest(
        store,
        folder / "archive.jsonl",
        DEFAULTS,
        folder / f"{run_id}-rejects.jsonl",
        format=ArchiveFormat.TURNS,
        run_id=run_id,
    )


@pytest.fixture
def loaded(tmp_path: Path):
    write_archive(tmp_path / "archive.jsonl", 3)
    store = open_store(f"sqlite:///{tmp_path / 'memory.db'}", migrate=True)
    load(store, tmp_path, "load")
    yield store, tmp_path
    store.close()


def turns_of(store, user: str) -> int:
    return store._rows("SELECT count(*) FROM turns WHERE user_id = ?", (user,))[0][0]


def test_rows_of_an_erased_owner_written_by_earlier_work_are_dropped_the_rest_go_in(
    loaded, monkeypatch
) -> None:
    store, folder = loaded
    began = datetime.now(UTC) - timedelta(seconds=5)
    monkeypatch.setattr(epochs, "PROCESS_STARTED", began)
    store.erase_user(BundleSelection(user_id="user001"), dry_run=False)
    assert turns_of(store, "user001") == 0

    again = load(store, folder, "stale")

    assert turns_of(store, "user001") == 0, "work begun before the erase writes none of theirs"
    assert turns_of(store, "user000") == turns_of(store, "user002") == 12, "the rest go on"
    assert again.turns_inserted == 0


def test_work_begun_after_the_erase_may_write_the_owner_again(loaded, monkeypatch) -> None:
    store, folder = loaded
    store.erase_user(BundleSelection(user_id="user001"), dry_run=False)
    monkeypatch.setattr(epochs, "PROCESS_STARTED", datetime.now(UTC) + timedelta(seconds=1))

    load(store, folder, "new-import")

    assert turns_of(store, "user001") == 12


def test_a_connection_that_does_not_say_when_its_work_began_cannot_write(loaded) -> None:
    store, folder = loaded
    store.erase_user(BundleSelection(user_id="user001"), dry_run=False)
    other = apsw.Connection(str(folder / "memory.db"))
    try:
        with pytest.raises(apsw.SQLError, match="mempipe_writer_epoch"):
            other.execute(
                "INSERT INTO turns (org_id, project_id, user_id, session_id, turn_seq, role, "
                "content) VALUES ('acme', 'travel', 'user001', 's', 0, 'user', 'back again')"
            )
    finally:
        other.close()


def test_the_erase_records_its_fence_with_the_time_it_committed(loaded) -> None:
    store, _ = loaded
    before = fence_time(datetime.now(UTC))
    store.erase_user(BundleSelection(user_id="user001", org_id="acme"), dry_run=False)
    [(user, org, project, at)] = store._rows(
        "SELECT user_id, org_id, project_id, erased_at FROM erased_owners"
    )
    assert (user, org, project) == ("user001", "acme", None)
    assert at >= before
    assert store.erased_since("acme", "travel", "user001", datetime.now(UTC) - timedelta(1))
    assert not store.erased_since("acme", "travel", "user000", datetime.now(UTC) - timedelta(1))
    assert not store.erased_since("other", "travel", "user001", datetime.now(UTC) - timedelta(1))
