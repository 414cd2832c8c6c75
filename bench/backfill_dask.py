"""A backfill spread over a local Dask cluster against the same backfill on the default runner,
in the same run, into SQLite and into SecantusDB (a MongoDB server from PyPI): whole
``mempipe backfill DIR`` processes over a directory of tiny two-turn archives (a tenth of them
with a record that is a reject), the rows and counts of each pair compared.

    python bench/backfill_dask.py [--files 20000] [--workers 2] [--backends sqlite,secantus]

The ratio is the Dask run's files per second over the default runner's, the cluster's start
included (what an operator waits for).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from processes import MempipeProcess, run_mempipe, session_server
from tiny_files import write_files


@contextmanager
def stores(backend: str, work: Path) -> Iterator[tuple[str, str]]:
    """Two empty stores of ``backend``: the default runner's and the cluster's."""
    if backend == "sqlite":
        yield f"sqlite:///{work / 'threads.db'}", f"sqlite:///{work / 'dask.db'}"
        return
    from secantus import SecantusDBServer

    with SecantusDBServer(storage_path=str(work / "secantus"), cache_size="512M") as server:
        base = server.uri.rstrip("/")
        yield tuple(f"{base}/bf_{uuid.uuid4().hex[:8]}?replicaSet=secantus" for _ in range(2))


def backfill(folder: Path, store: str, work: Path, *runner: str) -> tuple[MempipeProcess, dict]:
    args = ["backfill", str(folder), "--store", store, "--rejects-dir", str(work / "rejects")]
    done = run_mempipe([*args, *runner, "--json"], work)
    return done, json.loads(done.stdout)


def stats(store: str, work: Path) -> dict:
    shown = json.loads(run_mempipe(["stats", "--store", store, "--json"], work).stdout)
    return {k: shown[k] for k in ("turns", "sessions", "snapshots", "unpromoted_turns")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--backends", default="sqlite,secantus")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        folder = work / "archive"
        write_files(folder, options.files, rejects_every=10)
        print(f"files: {options.files:,} ({2 * options.files:,} turns, rejects in a tenth)")
        with session_server(work):
            for backend in options.backends.split(","):
                with stores(backend, work) as (threads_url, dask_url):
                    threads, by_threads = backfill(folder, threads_url, work)
                    runner = ["--partitions", str(options.workers), "--task-runner", "dask"]
                    dask, by_dask = backfill(folder, dask_url, work, *runner)
                    counts = ("turns_read", "turns_inserted", "rejected", "snapshots_created")
                    same = [by_dask[k] for k in counts] == [by_threads[k] for k in counts]
                    same = same and stats(dask_url, work) == stats(threads_url, work)
                    threads_rate = options.files / threads.seconds
                    dask_rate = options.files / dask.seconds
                    print(
                        f"{backend}: default runner {threads_rate:,.0f} files/s "
                        f"({threads.seconds:.1f} s); Dask, {options.workers} worker processes "
                        f"{dask_rate:,.0f} files/s ({dask.seconds:.1f} s); "
                        f"ratio {dask_rate / threads_rate:.2f}; "
                        f"rows and counts {'the same' if same else 'DIFFERENT'}"
                    )


if __name__ == "__main__":
    main()
