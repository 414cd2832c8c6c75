"""What forgetting costs against a plain ``DELETE`` of the same rows (issue 58).

    python bench/forget.py [--turns 1000000] [--per-user 500] [--batch 2000]

Builds a SQLite store of ``--turns`` real turns (the LongMemEval development set again and
again under new ids, users of ``--per-user`` turns), promoted into snapshots whose extraction
is then marked done (the bench's setup: a real replay of a million turns is not what is
timed), and copies it. Then, timed, each on its own copy:

* forget: the store's retention role as ``mempipe forget`` drives it (the service's
  ``forget_collection``), with the policy ``turns: {max_age: 30d}`` as of 2024-01-01: every turn
  said before December 2, 2023, of every user;
* reference: ``DELETE FROM turns WHERE created_at < ?`` with forget's cutoff, one statement,
  one transaction: the very rows forget removed (every turn is extracted; the counts are
  checked equal).

A second reference deletes the same rows with their text-index entries (FTS5's 'delete' of
each row, one statement): the part of forgetting that any removal which leaves the index true
must do.

Forget does more than the reference: each row's text-index entry ('delete' into FTS5), its
FORGET audit row, the snapshots emptied and fenced, ``secure_delete`` zeroing the freed pages,
a transaction per batch. The ratio says what that costs. Peak resident memory of the process is
printed after each (bounded: the queue of expired rows is a temporary table, not a list).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import apsw
from search import load_turns


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1_000_000)
    parser.add_argument("--per-user", type=int, default=500)
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()

    from mempipe.adapters.store import open_store
    from mempipe.adapters.store.unit_of_work import UnitOfWork
    from mempipe.domain.retention import expiry_of
    from mempipe.schemas.config import PromotionLimits
    from mempipe.schemas.retention import RetentionPolicy
    from mempipe.services.forget import forget_collection
    from mempipe.services.promote import promote_sessions

    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        work = Path(tmp)
        built = work / "built.db"
        started = time.perf_counter()
        store = load_turns(built, work, args.turns, args.per_user, False)
        promote_sessions(UnitOfWork(store), PromotionLimits(), ("semantic",), run_id="bench")
        store._conn.execute("UPDATE snapshot_extractions SET status = 'done', attempts = 1")
        store.close()
        print(f"built {args.turns:,} turns in {time.perf_counter() - started:.0f} s")
        forgotten, deleted, indexed = work / "forget.db", work / "delete.db", work / "fts.db"
        for copy in (forgotten, deleted, indexed):
            shutil.copy(built, copy)

        policy = RetentionPolicy.model_validate({"turns": {"max_age": "30d"}})
        expiry = expiry_of(policy, datetime(2024, 1, 1, tzinfo=UTC))
        store = open_store(f"sqlite:///{forgotten}")
        started = time.perf_counter()
        counts = forget_collection(UnitOfWork(store), expiry, "turns", "bench", args.batch)
        forget_s = time.perf_counter() - started
        store.close()
        rows = sum(c.records for c in counts)
        print(
            f"forget: {rows:,} turns in {forget_s:.1f} s ({rows / forget_s:,.0f} a second), "
            f"peak RSS {peak_mib():.0f} MiB"
        )

        reference = apsw.Connection(str(deleted))
        cutoff = expiry.cutoffs["turns"].isoformat(timespec="microseconds")
        started = time.perf_counter()
        with reference:
            reference.execute("DELETE FROM turns WHERE created_at < ?", (cutoff,))
        delete_s = time.perf_counter() - started
        assert reference.changes() == rows, (reference.changes(), rows)
        reference.close()
        rate = rows / delete_s
        print(f"reference, DELETE of the same rows: {delete_s:.1f} s ({rate:,.0f} a second)")
        print(f"ratio (forget rate / DELETE rate): {delete_s / forget_s:.3f}")

        reference = apsw.Connection(str(indexed))
        started = time.perf_counter()
        with reference:
            reference.execute(
                "INSERT INTO turns_fts (turns_fts, rowid, name, content) "
                "SELECT 'delete', id, name, content FROM turns WHERE created_at < ?",
                (cutoff,),
            )
            reference.execute("DELETE FROM turns WHERE created_at < ?", (cutoff,))
        both_s = time.perf_counter() - started
        reference.close()
        print(
            f"second reference, the same DELETE with the rows' text-index entries: {both_s:.1f} s "
            f"({rows / both_s:,.0f} a second); ratio {both_s / forget_s:.3f}"
        )


if __name__ == "__main__":
    main()
