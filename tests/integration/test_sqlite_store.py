"""The SQLite backend: migrations, idempotent turn writes, conflicts, atomic batches, errors."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from mempipe import migrations
from mempipe.adapters.store import open_store
from mempipe.adapters.store.sqlite import sql
from mempipe.errors import StoreError
from tests.helpers import make_turn
from tests.processes import spawn_python

ALL = [m.id for m in migrations.all_migrations()]
ROOT = Path(__file__).parents[2]


def test_a_new_store_is_migrated_on_first_use_and_records_what_it_applied(store) -> None:
    assert store.applied_migrations() == [m.id for m in migrations.all_migrations()]
    assert migrations.pending(store) == []


def test_migrating_twice_applies_nothing(store) -> None:
    report = migrations.migrate(store)
    assert report.applied == []
    assert report.already_applied == ALL


def test_pending_only_reads(tmp_path) -> None:
    fresh = open_store(f"sqlite:///{tmp_path / 'fresh.db'}")
    assert [m.id for m in migrations.pending(fresh)] == ALL
    assert fresh.applied_migrations() == []
    fresh.close()


def test_the_store_runs_in_wal_mode_with_sqlite_vec_and_fts5(store) -> None:
    conn = store._conn
    assert conn.execute("PRAGMA journal_mode").fetchall() == [("wal",)]
    assert conn.execute("SELECT vec_version()").fetchall()[0][0].startswith("v0.1")


def test_inserting_the_same_turns_twice_adds_nothing_and_counts_the_skips(store) -> None:
    batch = [make_turn(i) for i in range(5)]
    first = store.add_turns(batch, run_id="r1")
    again = store.add_turns(batch, run_id="r2")
    assert (first.inserted, first.duplicates) == (5, 0)
    assert (again.inserted, again.duplicates, again.conflicts) == (0, 5, [])
    assert store.stats().turns == 5


def test_a_stored_key_with_other_content_is_a_conflict_not_a_duplicate(store) -> None:
    store.add_turns([make_turn(0), make_turn(1)], run_id="r1")
    result = store.add_turns([make_turn(0), make_turn(1, content="changed")], run_id="r2")
    assert (result.inserted, result.duplicates) == (0, 1)
    (conflict,) = result.conflicts
    assert conflict.line == 2
    assert "turn 1 of session 's' is already stored with different content" in conflict.reason
    assert "a.jsonl:2" in conflict.reason


def test_two_records_with_one_key_in_one_batch_keep_the_first(store) -> None:
    result = store.add_turns([make_turn(0), make_turn(0, content="other")], run_id="r")
    assert result.inserted == 1
    assert len(result.conflicts) == 1


def test_inserted_turns_are_searchable_through_fts5(store) -> None:
    store.add_turns([make_turn(0, content="penicillin allergy")], run_id="r")
    rows = store._conn.execute(
        "SELECT t.content FROM turns_fts JOIN turns t ON t.id = turns_fts.rowid "
        "WHERE turns_fts MATCH 'penicillin'"
    ).fetchall()
    assert rows == [("penicillin allergy 0",)]


def test_a_batch_lands_whole_or_not_at_all(store, monkeypatch) -> None:
    monkeypatch.setattr(sql, "SYNC_TURNS_FTS", "INSERT INTO no_such_table VALUES (?)")
    with pytest.raises(StoreError):
        store.add_turns([make_turn(i) for i in range(3)], run_id="r")
    assert store.stats().turns == 0


def test_readers_see_the_last_committed_state_while_a_writer_is_open(store_url, store) -> None:
    store.add_turns([make_turn(0)], run_id="r")
    reader = open_store(store_url, migrate=True)
    writer = apsw.Connection(store_url.removeprefix("sqlite:///"))
    writer.create_scalar_function("mempipe_writer_epoch", lambda: "now", 0)  # the erase fence's
    writer.execute("BEGIN IMMEDIATE")
    writer.execute(
        "INSERT INTO turns (org_id, project_id, session_id, turn_seq, role, content, source_path)"
        " VALUES ('o', 'p', 's', 9, 'user', 'uncommitted', 'x')"
    )
    assert reader.stats().turns == 1
    writer.execute("COMMIT")
    assert reader.stats().turns == 2
    reader.close()
    writer.close()


def test_unusable_stores_are_clear_errors(tmp_path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        open_store(f"sqlite:///{tmp_path / 'missing' / 'memory.db'}", migrate=True)
    not_a_db = tmp_path / "notes.db"
    not_a_db.write_text("this is not sqlite " * 100)
    with pytest.raises(StoreError, match="not a SQLite database"):
        open_store(f"sqlite:///{not_a_db}", migrate=True)
    with pytest.raises(StoreError, match="unsupported store URL scheme 'postgres'"):
        open_store("postgres://localhost/db", migrate=True)


WRITER = """
import sys
from mempipe.adapters.store import open_store
from tests.helpers import make_turn

store = open_store(sys.argv[1])
for batch in range(400):
    session = f"{sys.argv[2]}-{batch}"
    store.add_turns([make_turn(seq, session=session) for seq in range(20)], None)
store.close()
"""


@pytest.mark.process("two writers of one store file in two processes")
def test_writers_in_two_processes_wait_for_each_other_instead_of_failing(tmp_path) -> None:
    """A write that reads before it writes (the turn count before an insert) takes the write
    lock first: a deferred one fails at once with "database is locked" whenever the other
    process commits between its read and its write, whatever the busy timeout."""
    url = f"sqlite:///{tmp_path / 'two.db'}"
    open_store(url, migrate=True).close()
    writers = [spawn_python(WRITER, url, name, cwd=ROOT) for name in ("a", "b")]
    errors = [w.communicate(timeout=240)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0], errors
    store = open_store(url, migrate=True)
    assert store._rows("SELECT count(*) FROM turns")[0][0] == 2 * 400 * 20
    store.close()


def test_each_backend_keeps_its_own_steps_and_every_step_is_a_shared_version() -> None:
    """A backend's migrations folder holds only versions of the shared list, each with its
    ``apply``; a version it has no step for changes nothing there."""
    from importlib import resources

    from mempipe.adapters.store.mongo import migrations as mongo_steps
    from mempipe.adapters.store.sqlite import migrations as sqlite_steps

    for package in (sqlite_steps, mongo_steps):
        names = {
            entry.name.removesuffix(".py")
            for entry in resources.files(package).iterdir()
            if entry.name[:4].isdigit()
        }
        assert names <= set(ALL), names - set(ALL)
        assert all(
            m.step(package.__name__) is not None for m in migrations.VERSIONS if m.id in names
        )
    assert migrations.VERSIONS[5].step(sqlite_steps.__name__) is None  # MongoDB's indexes only
