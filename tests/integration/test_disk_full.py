"""A full disk is named as such (DESIGN rule: failure classes): the write fails with a
retryable resource error that says the disk is full, not the "cannot rollback" of the rollback
SQLite had already done, and once there is room again the same work completes exactly.

SQLite's ``max_page_count`` makes the store's file full at a chosen size, which is what a full
disk looks like to SQLite (SQLITE_FULL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mempipe.adapters.store import open_store
from mempipe.errors import ResourceError
from mempipe.schemas.archive import ArchiveFormat
from mempipe.schemas.identity import IdentityDefaults
from tests.helpers import ingest, write_archive

DEFAULTS = IdentityDefaults(org_id="acme", project_id="travel")


def test_a_full_disk_is_a_retryable_resource_error_and_the_rerun_is_exact(tmp_path: Path) -> None:
    write_archive(tmp_path / "archive.jsonl", 200)
    store = open_store(f"sqlite:///{tmp_path / 'memory.db'}", migrate=True)
    pages = store._rows("PRAGMA page_count")[0][0]
    store._conn.execute(f"PRAGMA max_page_count = {pages + 8}")

    def load(run_id: str):
        return ingest(
            store,
            tmp_path / "archive.jsonl",
            DEFAULTS,
            tmp_path / "rejects.jsonl",
            format=ArchiveFormat.TURNS,
            run_id=run_id,
            batch_size=100,
        )

    with pytest.raises(ResourceError, match="disk is full") as caught:
        load("full")
    assert caught.value.retryable
    assert "rollback" not in str(caught.value)
    kept = store._rows("SELECT count(*) FROM turns")[0][0]
    assert kept % 100 == 0, "each batch wholly in or wholly out"

    store._conn.execute("PRAGMA max_page_count = 1073741823")
    again = load("after")
    assert again.turns_inserted == 200 * 12 - kept
    assert store._rows("SELECT count(*) FROM turns")[0][0] == 200 * 12
    store.close()
