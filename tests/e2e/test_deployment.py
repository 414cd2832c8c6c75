"""What ops do: start a Prefect server, deploy from prefect.yaml, start a process worker, run the
backfill deployment with `prefect deployment run ... --watch`, and look at the store."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from mempipe.adapters.store import open_store

ROOT = Path(__file__).parents[2]
PREFECT = str(Path(sys.executable).with_name("prefect"))

pytestmark = pytest.mark.prefect


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop(process: subprocess.Popen) -> None:
    """Ask politely, then insist: a worker may take its time to drain on SIGTERM."""
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=20)


def prefect(*args: str, env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [PREFECT, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"prefect {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def ops_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A real Prefect server on a free port, with its own home and database."""
    home = tmp_path_factory.mktemp("prefect-home")
    port = free_port()
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_WORKER_QUERY_SECONDS": "2",
        "MEMPIPE_HOME": str(ROOT),
    }
    log = (home / "server.log").open("w")
    server = subprocess.Popen(
        [PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2):
                break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"Prefect server did not start:\n{(home / 'server.log').read_text()}")
            time.sleep(0.5)
    yield env
    stop(server)
    log.close()


def test_deploy_from_prefect_yaml_and_run_backfill_through_a_worker(
    ops_env, fixtures, tmp_path
) -> None:
    assert shutil.which(PREFECT)
    prefect("work-pool", "create", "mempipe-local", "--type", "process", env=ops_env)
    deployed = prefect("--no-prompt", "deploy", "--all", env=ops_env)
    assert "backfill/backfill" in deployed.stdout

    worker_log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(
        [PREFECT, "worker", "start", "--pool", "mempipe-local", "--type", "process"],
        cwd=tmp_path,
        env=ops_env,
        stdout=worker_log,
        stderr=subprocess.STDOUT,
    )
    store = tmp_path / "ops.db"
    try:
        run = subprocess.run(
            [
                PREFECT,
                "deployment",
                "run",
                "backfill/backfill",
                "--param",
                f"paths={json.dumps([str(fixtures)])}",
                "--param",
                f"store=sqlite:///{store}",
                "--param",
                "org_id=acme",
                "--watch",
                "--watch-timeout",
                "240",
            ],
            cwd=ROOT,
            env=ops_env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        stop(worker)
        worker_log.close()
    output = run.stdout + run.stderr
    assert run.returncode == 0, output + (tmp_path / "worker.log").read_text()
    assert "Completed" in output

    opened = open_store(f"sqlite:///{store}")
    stats = opened.stats()
    orgs = opened._conn.execute("SELECT DISTINCT org_id FROM turns").fetchall()
    opened.close()
    assert (stats.turns, stats.sessions, stats.unpromoted_turns) == (34, 12, 0)
    assert stats.runs == {"completed": 1}
    assert orgs == [("acme",)]
