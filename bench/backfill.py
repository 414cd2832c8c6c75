"""Backfill throughput and memory, against raw apsw inserts of the same rows in the same run.

    python bench/backfill.py [--turns 200000] [--memory-turns 1000000] [--out DIR]

Writes a synthetic canonical-JSONL archive of short turns, then measures:

* end to end: the backfill flow (parse, validate, insert in batches, FTS index, promote into
  snapshots) on a fresh SQLite store, with Prefect's local server already up;
* reference: raw apsw ``executemany`` of the very same row tuples into a fresh store with the same
  schema, in transactions of the same batch size, FTS included (the database's own cost);
* memory: the peak RSS of a separate ``mempipe backfill`` process over an archive of
  ``--memory-turns`` turns.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import tempfile
import time
from pathlib import Path

from processes import run_mempipe

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

WORDS = [
    *("the", "a", "order", "flight", "seat", "window", "refund"),
    *("lisbon", "airport", "home", "ticket", "deploy", "canary"),
]
BATCH = 5000


def write_archive(path: Path, turns: int, turns_per_session: int = 10) -> None:
    rng = random.Random(7)
    with path.open("w") as out:
        for i in range(turns):
            session, seq = divmod(i, turns_per_session)
            minute = seq * 2
            out.write(
                json.dumps(
                    {
                        "session_id": f"s{session}",
                        "turn_seq": seq,
                        "role": "user" if seq % 2 == 0 else "assistant",
                        "content": " ".join(rng.choices(WORDS, k=8)),
                        "created_at": f"2024-01-01T{10 + minute // 60:02d}:{minute % 60:02d}:00Z",
                        "message_id": f"m{i}",
                    }
                )
                + "\n"
            )


def end_to_end(archive: Path, store_url: str, work: Path) -> tuple[float, dict]:
    from mempipe.bootstrap import prepare_store
    from mempipe.cli.flow_runs import reporting_to_prefect
    from mempipe.flows.backfill import backfill_flow

    prepare_store(store_url, None, create=True)  # as `mempipe backfill` does before its flow
    started = time.perf_counter()
    with reporting_to_prefect():  # as `mempipe backfill` runs it
        summary = backfill_flow(
            paths=[str(archive)],
            org_id="bench",
            project_id="bench",
            store=store_url,
            config=str(work / "none.yaml"),
            rejects_dir=str(work / "rejects"),
            batch_size=BATCH,
        )
    return time.perf_counter() - started, summary.model_dump(exclude={"files"})


def raw_apsw(archive: Path, store_url: str) -> float:
    """Insert the same rows with plain apsw: no parsing or validation, only the database."""
    from mempipe.adapters.store import open_store
    from mempipe.adapters.store.sqlite import sql
    from mempipe.archives import ArchiveReader
    from mempipe.schemas.archive import ArchiveFormat
    from mempipe.schemas.identity import IdentityDefaults

    defaults = IdentityDefaults(org_id="bench", project_id="bench")
    rows = [
        sql.turn_row(turn, "raw") for turn in ArchiveReader(archive, ArchiveFormat.TURNS, defaults)
    ]
    insert = (
        f"INSERT INTO turns ({', '.join(sql.TURN_COLUMNS)}) "
        f"VALUES ({', '.join('?' for _ in sql.TURN_COLUMNS)}) ON CONFLICT DO NOTHING"
    )
    store = open_store(store_url, migrate=True)
    conn = store._conn
    started = time.perf_counter()
    for start in range(0, len(rows), BATCH):
        with conn:
            before = conn.execute(sql.MAX_TURN_ID).fetchall()[0][0]
            conn.executemany(insert, rows[start : start + BATCH])
            conn.execute(sql.SYNC_TURNS_FTS, (before,))
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed


def peak_rss_mb(archive: Path, work: Path) -> float:
    """Peak RSS of a separate `mempipe backfill` process (its own, not Prefect's server's)."""
    store = f"sqlite:///{work / 'memory-rss.db'}"
    args = ["backfill", str(archive), "--json", "--store", store]
    return run_mempipe([*args, "--rejects-dir", str(work / "rejects")], work).peak_rss_mb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200_000)
    parser.add_argument("--memory-turns", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, default=None, help="keep the files here")
    args = parser.parse_args()

    work = args.out or Path(tempfile.mkdtemp(prefix="mempipe-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    archive = work / "archive.jsonl"
    write_archive(archive, args.turns)
    print(f"archive: {args.turns:,} turns, {archive.stat().st_size / 1e6:.1f} MB", flush=True)

    from mempipe.bootstrap import prepare_store
    from mempipe.flows.migrate import migrate_flow

    warmup = f"sqlite:///{work / 'warmup.db'}"
    prepare_store(warmup, None, create=True)  # a flow refuses a store that is not there
    migrate_flow(store=warmup, config=str(work / "none.yaml"))

    e2e_seconds, summary = end_to_end(archive, f"sqlite:///{work / 'e2e.db'}", work)
    raw_seconds = raw_apsw(archive, f"sqlite:///{work / 'raw.db'}")
    assert summary["turns_inserted"] == args.turns, summary
    e2e_rate, raw_rate = args.turns / e2e_seconds, args.turns / raw_seconds
    print(f"end to end (backfill flow + promotion): {e2e_rate:,.0f} turns/s ({e2e_seconds:.2f} s)")
    print(f"reference (raw apsw inserts, same rows): {raw_rate:,.0f} turns/s ({raw_seconds:.2f} s)")
    print(f"ratio end-to-end / raw: {e2e_rate / raw_rate:.2f}")
    print(
        f"snapshots: {summary['snapshots_created']:,}; own process peak RSS so far: "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
    )

    if args.memory_turns:
        big = work / "archive-memory.jsonl"
        write_archive(big, args.memory_turns)
        rss = peak_rss_mb(big, work)
        print(
            f"peak RSS of `mempipe backfill` over {args.memory_turns:,} turns "
            f"({big.stat().st_size / 1e6:.0f} MB): {rss:.0f} MB"
        )


if __name__ == "__main__":
    main()
