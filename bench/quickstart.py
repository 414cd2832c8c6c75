"""How long a small job takes as ops feel it: whole ``mempipe backfill`` processes of the 20-turn
sample on a fresh store, against ``mempipe stats`` (the same interpreter, imports and store
open, no flow) measured in the same run.

    python bench/quickstart.py [--runs 5]

Three ways of reaching a Prefect API are timed, each with its own Prefect home: mempipe's
server for a session of commands (the default without ``PREFECT_API_URL``: the first command
starts it, reported apart, the next reuse it), Prefect's temporary server started and stopped by
every command (``MEMPIPE_SERVER_MODE=temporary``), and a server started once with
``prefect server start``. The goal: a small job at most 4x ``stats``.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import processes  # noqa: F401 (times processes as installed)

SAMPLE = Path(__file__).parents[1] / "examples" / "sample-archive"


def timed(args: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "mempipe", *args], env=env, cwd=cwd, check=True, capture_output=True
    )
    return time.perf_counter() - started


def backfills(env: dict[str, str], work: Path, runs: int, name: str) -> list[float]:
    seconds = []
    for n in range(runs + 1):
        store = f"sqlite:///{work / f'{name}-{n}.db'}"
        took = timed(["backfill", str(SAMPLE), "--user-id", "maya", "--store", store], env, work)
        if n:  # the first run initialises the Prefect home and is not counted
            seconds.append(took)
    return seconds


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/health", timeout=2).read()
            return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"no Prefect server at {url} after {timeout} s")


def report(name: str, seconds: list[float], reference: float) -> None:
    median = statistics.median(seconds)
    print(
        f"{name:<44} median {median:6.2f} s  (min {min(seconds):.2f}, max {max(seconds):.2f})"
        f"  {median / reference:5.1f}x stats"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
        env["PREFECT_HOME"] = str(work / "prefect-stats")
        store = f"sqlite:///{work / 'stats.db'}"
        timed(["init", "--store", store], env, work)
        reference = statistics.median(
            timed(["stats", "--store", store], env, work) for _ in range(args.runs)
        )
        print(f"{'reference: mempipe stats':<44} median {reference:6.2f} s")
        session = dict(env, PREFECT_HOME=str(work / "prefect-session"))
        first = timed(
            ["backfill", str(SAMPLE), "--user-id", "maya", "--store", f"sqlite:///{work}/s.db"],
            session,
            work,
        )
        print(f"{'backfill that starts the session server':<44} {first:6.2f} s")
        try:
            report(
                "backfill, the session server running",
                backfills(session, work, args.runs, "session"),
                reference,
            )
        finally:
            timed(["server", "stop"], session, work)
        temporary = dict(
            env, PREFECT_HOME=str(work / "prefect-temporary"), MEMPIPE_SERVER_MODE="temporary"
        )
        report(
            "backfill, Prefect's temporary server",
            backfills(temporary, work, args.runs, "temporary"),
            reference,
        )

        served = dict(env, PREFECT_HOME=str(work / "prefect-served"))
        port = free_port()
        url = f"http://127.0.0.1:{port}/api"
        server = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--port", str(port)],
            env=served,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for(url)
            served["PREFECT_API_URL"] = url
            report(
                "backfill, a running `prefect server start`",
                backfills(served, work, args.runs, "served"),
                reference,
            )
        finally:
            server.terminate()
            server.wait(30)


if __name__ == "__main__":
    main()
