"""Store-to-store copy: SQLite -> MongoDB fake -> SQLite verified; a copy killed with SIGKILL
after some batches (a real process) is started again, goes on from its last committed batch,
and ends verified with no record twice."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from mempipe.adapters.store import open_store
from mempipe.adapters.store.unit_of_work import UnitOfWork
from mempipe.bootstrap import prepare_store
from mempipe.schemas.archive import ArchiveFormat
from mempipe.schemas.audit import AuditRow, ReconcileAction
from mempipe.schemas.identity import IdentityDefaults
from mempipe.services.copy import copy_store
from tests.helpers import ingest, invoke, read
from tests.processes import environment, kill_when, start
from tests.stores import declared, mongomock_store

AT = datetime(2024, 5, 1, tzinfo=UTC)


def test_sqlite_to_mongodb_and_back_is_verified(source, tmp_path) -> None:
    mongo = mongomock_store(tmp_path)
    declared(mongo)
    there = copy_store(
        UnitOfWork(source),
        UnitOfWork(mongo),
        run_id="c1",
        rejects_file=tmp_path / "r1",
        batch_size=7,
    )
    assert there.verified, there.differences
    assert there.copied["semantic"] > 0

    url = f"sqlite:///{tmp_path / 'back.db'}"
    prepare_store(url, None, create=True)
    back = open_store(url, migrate=True)
    declared(back)
    home = copy_store(
        UnitOfWork(mongo), UnitOfWork(back), run_id="c2", rejects_file=tmp_path / "r2", batch_size=5
    )
    assert home.verified, home.differences
    assert home.digests == there.digests

    again = copy_store(
        UnitOfWork(source),
        UnitOfWork(mongo),
        run_id="c3",
        rejects_file=tmp_path / "r3",
        batch_size=7,
    )
    assert again.verified
    assert sum(again.copied.values()) == 0, "a second copy writes nothing"
    back.close()
    mongo.close()


@pytest.fixture
def big_store(tmp_path: Path) -> Path:
    """20,000 turns and 20,000 audit rows: a copy in batches of 200 takes a while."""
    path = tmp_path / "big.db"
    url = f"sqlite:///{path}"
    prepare_store(url, None, create=True)
    store = open_store(url, migrate=True)
    archive = tmp_path / "turns.jsonl"
    archive.write_bytes(
        b"".join(
            orjson.dumps(
                {"session_id": f"s{n // 10}", "role": "user", "content": f"turn number {n}"}
            )
            + b"\n"
            for n in range(20_000)
        )
    )
    defaults = IdentityDefaults(org_id="o", project_id="p", user_id="u")
    ingest(store, archive, defaults, tmp_path, format=ArchiveFormat.TURNS)
    rows = [
        AuditRow(
            run_id="r",
            at=AT + timedelta(seconds=n),
            day=AT.date(),
            org_id="o",
            project_id="p",
            user_id="u",
            memory_type="semantic",
            action=ReconcileAction.ADD,
            memory_id=f"m{n}",
            version=1,
            text=f"fact {n}",
        )
        for n in range(20_000)
    ]
    with store.write_transaction():
        store.add_audit(rows)
    store.close()
    return path


@pytest.mark.process("a copy killed with SIGKILL")
def test_a_copy_killed_part_way_goes_on_and_ends_verified_without_duplicates(
    prefect_server, big_store, tmp_path
) -> None:
    target = tmp_path / "target.db"
    args = ["copy", "--to", f"sqlite:///{target}", "--store", f"sqlite:///{big_store}"]
    args += ["--batch-size", "200", "--json"]
    env = environment(prefect_server, PREFECT_LOGGING_LEVEL="WARNING")
    copying = start(args, tmp_path, env)

    kill_when(copying, lambda: _audit_rows(target) >= 2_000)
    left = read(target, "SELECT count(*) FROM audit")[0][0]
    assert 0 < left < 20_000, "killed part way"

    resumed = invoke(*args, cwd=tmp_path)

    assert resumed.exit_code == 0, resumed.output
    summary = orjson.loads(resumed.stdout)
    assert summary["verified"] is True
    assert summary["copied"]["audit"] == 20_000 - left, "it went on after the last batch"
    assert read(target, "SELECT count(*) FROM audit")[0][0] == 20_000
    assert read(target, "SELECT count(*) FROM turns")[0][0] == 20_000


@pytest.mark.process("a real SIGTERM")
def test_a_copy_stopped_by_sigterm_is_recorded_interrupted_and_a_rerun_ends_verified(
    prefect_server, big_store, tmp_path
) -> None:
    target = tmp_path / "target.db"
    args = ["copy", "--to", f"sqlite:///{target}", "--store", f"sqlite:///{big_store}"]
    args += ["--batch-size", "200", "--json"]
    env = environment(prefect_server, PREFECT_LOGGING_LEVEL="WARNING")
    copying = start(args, tmp_path, env)
    deadline = time.monotonic() + 240
    while not _audit_rows(target) >= 2_000:
        assert copying.poll() is None, copying.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    sent = time.monotonic()
    copying.send_signal(signal.SIGTERM)
    out, _ = copying.communicate(timeout=120)

    assert time.monotonic() - sent < 10
    assert copying.returncode == 143, out
    assert orjson.loads(out)["kind"] == "interrupted"
    assert read(target, "SELECT status FROM runs WHERE flow = 'copy'") == [("interrupted",)]
    left = _audit_rows(target)
    assert left < 20_000, "stopped part way"

    resumed = invoke(*args, cwd=tmp_path)
    assert resumed.exit_code == 0, resumed.output
    assert orjson.loads(resumed.stdout)["verified"] is True
    assert _audit_rows(target) == 20_000


def _audit_rows(target: Path) -> int:
    if not target.exists():
        return 0
    try:
        return read(target, "SELECT count(*) FROM audit")[0][0]
    except Exception:  # the file exists before its tables do
        return 0
