"""Whole mempipe processes for the benchmarks: their wall time, their own peak RSS (not that of
Prefect's server) and what they printed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

# Whole processes are timed as an installed mempipe runs: with its bytecode cached. An
# environment that forbids writing it (PYTHONDONTWRITEBYTECODE, as some sandboxes set) makes
# every process compile mempipe's modules again, 0.05-0.15 s of a small command.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

_REPORTING_PEAK = (
    "import resource, sys\n"
    "from mempipe.cli import cli\n"
    "try:\n"
    "    cli(sys.argv[1:], standalone_mode=False)\n"
    "finally:\n"
    "    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
)


class MempipeProcess(NamedTuple):
    seconds: float
    peak_rss_mb: float
    stdout: str


def run_mempipe(args: list[str], cwd: Path) -> MempipeProcess:
    """``mempipe ARGS`` in a process of its own, run in ``cwd``; a failure raises."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _REPORTING_PEAK, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    peak_kb = int(done.stderr.strip().splitlines()[-1])
    return MempipeProcess(time.perf_counter() - started, peak_kb / 1024, done.stdout)


@contextmanager
def session_server(work: Path) -> Iterator[None]:
    """mempipe's server for a session of commands, started (untimed) in a Prefect home under
    ``work`` before the block's commands and stopped after: each timed command is one after a
    session's first. Where ``PREFECT_API_URL`` is set, the commands report there instead."""
    os.environ["PREFECT_HOME"] = str(work / "prefect")
    if os.environ.get("PREFECT_API_URL"):
        yield
        return
    run_mempipe(["server", "start"], work)
    try:
        yield
    finally:
        run_mempipe(["server", "stop"], work)
