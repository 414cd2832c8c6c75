"""The one place the tests start processes: ``mempipe`` as a command, a Prefect server and a
process worker, Prefect's CLI, a headless browser.

A test runs mempipe in its own process only where the process boundary is the behaviour
(signals, kill and resume, concurrency between processes, an exit after ``os._exit``, the
stdout/stderr split, the session server, orphans, installs, a deployment through a worker, the
tutorial's walk); it says why in one line, as the reason of its marker:
``@pytest.mark.process("a real SIGTERM")``. Every other test calls the command in-process
(:func:`tests.helpers.invoke`). The fast tier, ``pytest -m "not process"``, runs none of the
marked ones, and a mempipe process started by a test that is not marked fails that test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PREFECT = str(Path(sys.executable).with_name("prefect"))
MEMPIPE = [sys.executable, "-m", "mempipe"]

running: pytest.Item | None = None
"""The test being run (set by ``tests/conftest.py``), whose marker a mempipe process needs."""


def _allowed() -> None:
    marker = running.get_closest_marker("process") if running is not None else None
    if running is not None and (marker is None or not marker.args):
        pytest.fail(
            f"{running.nodeid} starts a mempipe process: mark it "
            '@pytest.mark.process("why the process boundary is the behaviour"), or call the '
            "command in-process (tests.helpers.invoke)"
        )


def environment(api_url: str | None, **extra: str) -> dict[str, str]:
    """This process's environment for a child: the Prefect API given (or none), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    if api_url:
        env["PREFECT_API_URL"] = api_url
    return {**env, **extra}


def start(args: list[str], cwd: Path, env: dict[str, str], **popen: object) -> subprocess.Popen:
    """``mempipe ARGS`` started in its own process."""
    _allowed()
    return subprocess.Popen(  # type: ignore[call-overload]
        [*MEMPIPE, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def run(
    args: list[str], cwd: Path, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess:
    """``mempipe ARGS`` in its own process, to its end."""
    process = start(args, cwd, env)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def shell(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """A shell line as a user types it (the tutorial's, a page's Run example)."""
    if re.search(r"\bmempipe(?![-\w./])", command):
        _allowed()
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def python(
    code: str, env: dict[str, str], *args: str, cwd: Path | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    """``python -c CODE ARGS`` in a fresh interpreter (what importing a module sets up, what an
    install without some packages looks like)."""
    if "mempipe" in code:
        _allowed()
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=check,
        timeout=300,
    )


def script(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """``python SCRIPT ARGS`` (a ``bench/`` script, which runs mempipe's flows)."""
    _allowed()
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=600
    )


def spawn_python(code: str, *args: str, cwd: Path) -> subprocess.Popen:
    """``python -c CODE ARGS`` started, its stderr piped (writers of one store at once)."""
    _allowed()
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], cwd=cwd, stderr=subprocess.PIPE, text=True
    )


def server_status(cwd: Path, env: dict[str, str]) -> dict:
    """``mempipe server status --json``, as a command of its own reads the Prefect home."""
    shown = run(["server", "status", "--json"], cwd, env)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def gone(pid: int) -> bool:
    """The process has ended: no such process, or a zombie its parent has not reaped yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def left_behind(pids: set[int], within: float = 60) -> set[int]:
    """Those of the processes still running once ``within`` seconds have passed (or none)."""
    deadline = time.monotonic() + within
    while (alive := {pid for pid in pids if not gone(pid)}) and time.monotonic() < deadline:
        time.sleep(0.5)
    return alive


def _when(process: subprocess.Popen, ready: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, f"ended before the {what}: {process.communicate()}"
        assert time.monotonic() < deadline, "never got there"
        time.sleep(0.05)


def kill_when(process: subprocess.Popen, ready: Callable[[], bool], timeout: float = 240) -> None:
    """SIGKILL ``process`` as soon as ``ready()`` holds; fail if it ended first."""
    _when(process, ready, timeout, "kill")
    process.send_signal(signal.SIGKILL)
    process.wait()


def stop_when(
    process: subprocess.Popen,
    ready: Callable[[], bool],
    signum: int,
    *,
    group: bool = False,
    timeout: float = 240,
) -> float:
    """Send ``signum`` once ``ready()`` holds; the seconds the process took to exit after it."""
    _when(process, ready, timeout, "signal")
    sent = time.monotonic()
    if group:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    process.wait(timeout=120)
    took = time.monotonic() - sent
    print(f"{signal.Signals(signum).name}: exit {process.returncode} after {took:.2f} s")
    return took


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
    """Prefect's own CLI, as ops type it, from the repository root (where prefect.yaml is)."""
    result = subprocess.run(
        [PREFECT, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"prefect {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result


@contextmanager
def prefect_server_process(home: Path) -> Iterator[dict[str, str]]:
    """A real Prefect server on a free port, with its own home and database, as ops start it;
    yields the environment that reaches it."""
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
    with (home / "server.log").open("w") as log:
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
                    pytest.fail(
                        f"Prefect server did not start:\n{(home / 'server.log').read_text()}"
                    )
                time.sleep(0.5)
        try:
            yield env
        finally:
            stop(server)


@contextmanager
def serving_worker(env: dict[str, str], cwd: Path) -> Iterator[None]:
    """A process worker on the ``mempipe-local`` pool for the block, its log in ``cwd``: the
    flow runs it starts are mempipe processes."""
    _allowed()
    with (cwd / "worker.log").open("w") as log:
        worker = subprocess.Popen(
            [PREFECT, "worker", "start", "--pool", "mempipe-local", "--type", "process"],
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield
        finally:
            stop(worker)


def run_deployment(
    name: str, params: dict[str, object], env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess:
    """``prefect deployment run NAME --param k=v ... --watch``, as an operator types it."""
    args = [PREFECT, "deployment", "run", name]
    for key, value in params.items():
        args += ["--param", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    return subprocess.run(
        [*args, "--watch", "--watch-timeout", "240"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def browser() -> str:
    """Debian's chromium, which ``.ci/run`` installs; the test is skipped without it."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("no chromium: .ci/run installs Debian's")
    return found


def opened(page: Path, screenshot: Path) -> tuple[str, list[str]]:
    """The page's DOM once its scripts ran, and what its console said; a screenshot beside."""
    common = [
        browser(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--virtual-time-budget=10000",
        "--window-size=1280,2400",
    ]
    rendered = subprocess.run(
        [*common, "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    subprocess.run(
        [*common, f"--screenshot={screenshot}", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    console = [line for line in rendered.stderr.splitlines() if ":CONSOLE" in line]
    return rendered.stdout, console
