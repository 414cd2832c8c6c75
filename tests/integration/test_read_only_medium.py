"""A store on a medium nobody can write (a read-only mount, a snapshot) can still be read: WAL
mode would write its ``-shm`` beside the file, so the store is opened as the immutable file it
is; a writing command is refused, naming why.

The medium is a read-only bind mount of a folder (this machine's tests run as root); where
mounting is not allowed the test is skipped, saying so."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mempipe.adapters.store import open_store
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.errors import StoreError
from mempipe.schemas.archive import ArchiveFormat
from mempipe.schemas.identity import IdentityDefaults
from mempipe.schemas.search import ReadFilter, SearchMode
from mempipe.services.search import search
from tests.helpers import ingest, write_archive


@pytest.fixture
def read_only_copy(tmp_path: Path) -> Iterator[Path]:
    source, mounted = tmp_path / "source", tmp_path / "mounted"
    source.mkdir()
    mounted.mkdir()
    write_archive(tmp_path / "archive.jsonl", 3)
    store = open_store(f"sqlite:///{source / 'memory.db'}", migrate=True)
    ingest(
        store,
        tmp_path / "archive.jsonl",
        IdentityDefaults(org_id="acme", project_id="travel"),
        tmp_path / "rejects.jsonl",
        format=ArchiveFormat.TURNS,
        run_id="load",
    )
    store.close()
    for command in (
        ["mount", "--bind", str(source), str(mounted)],
        ["mount", "-o", "remount,ro,bind", str(mounted)],
    ):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            subprocess.run(["umount", str(mounted)], capture_output=True, check=False)
            pytest.skip(f"cannot make a read-only mount here: {done.stderr.strip()}")
    try:
        yield mounted / "memory.db"
    finally:
        subprocess.run(["umount", str(mounted)], check=True)


def test_a_store_on_a_read_only_medium_is_read_and_a_write_is_refused(read_only_copy) -> None:
    url = f"sqlite:///{read_only_copy}"
    store = open_store(url, read_only=True)
    try:
        assert store.stats().turns == 3 * 6 * 2
        hits = search(
            UnitOfWork(store), lambda _: None, "airport", "stm", SearchMode.TEXT, ReadFilter(), 5
        )
        assert len(hits.hits) == 5
    finally:
        store.close()
    with pytest.raises(StoreError, match="not writable"):
        open_store(url, migrate=True)
