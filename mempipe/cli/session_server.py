"""mempipe's Prefect server for a session of commands.

A command records its flow run through a Prefect API. Where none is configured, starting
Prefect's temporary server for every command costs 5-10 s on a 2-core machine (importing
Prefect's server, checking its database) for a job that itself takes a fraction of a second.
So the first command without ``PREFECT_API_URL`` starts one server that the commands after it
reuse. It is a process of its own, not of the command that started it (a session of its own,
outside the command's orphan guard): its place is written in the Prefect home, where
``mempipe server status`` reads it; it stops itself once no command has used it for its idle
time (``MEMPIPE_SERVER_IDLE_SECONDS``); ``mempipe server stop`` stops it now. One server per
Prefect home, so its runs land in the database a temporary server would have used.

A server is its installation's: a command reuses one only if the same installation started it
(the same interpreter, mempipe and Prefect, which ``mempipe server status`` shows); another
installation's server on the same Prefect home is replaced while no command uses it (an
upgrade), and named, not used, while one does (two Prefect versions must not share a
database). ``mempipe server stop`` leaves a server that commands are using, or another
installation's, running unless ``--force``.

``python -m mempipe.cli.session_server_process`` is the server process itself; it writes its
log (``mempipe-server.log`` in the Prefect home): when it started and stopped, and Prefect's
API's own errors.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from mempipe.domain.liveness import process_alive
from mempipe.errors import MempipeError
from mempipe.watchdog import SESSION_SERVER

PROCESS_MARK = SESSION_SERVER.decode()
"""In the server's command line: how ``stop`` and the orphan guard know it."""
PROCESS_MODULE = f"{PROCESS_MARK}_process"
"""The module run as the server (not this one, which the ``mempipe.cli`` package imports)."""
RECORD = "mempipe-server.json"
CLIENTS = "mempipe-server.clients"
LOG = "mempipe-server.log"
LOCK = "mempipe-server.lock"
CHECK_S = 1.0


class Installation(BaseModel):
    """What started a server: the interpreter (its environment), mempipe's and Prefect's
    versions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    python: str
    mempipe: str
    prefect: str

    @classmethod
    def this(cls) -> Installation:
        import prefect

        from mempipe import __version__

        return cls(python=sys.executable, mempipe=__version__, prefect=prefect.__version__)

    def __str__(self) -> str:
        return f"mempipe {self.mempipe}, Prefect {self.prefect}, {self.python}"


class ServerRecord(BaseModel):
    """Where the session's server runs, as it writes it once it answers."""

    model_config = ConfigDict(extra="forbid")

    pid: int
    api_url: str
    prefect_home: str
    database: str
    idle_seconds: float
    started_at: datetime
    installation: Installation | None = None
    """None: a server of a mempipe that did not record it (older): another installation's."""

    @property
    def ours(self) -> bool:
        return self.installation == Installation.this()


class SessionServerError(MempipeError):
    """mempipe's Prefect server could not be started or stopped."""


def _read(home: Path) -> ServerRecord | None:
    try:
        return ServerRecord.model_validate_json((home / RECORD).read_bytes())
    except (OSError, ValueError):
        return None


def _answers(api_url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _is_server(pid: int) -> bool:
    """The pid is a live mempipe session server (not a pid the system gave to another)."""
    try:
        return PROCESS_MARK.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return process_alive(pid) and not sys.platform.startswith("linux")


def running(home: Path) -> ServerRecord | None:
    """The session's server of this Prefect home, if one is running and answers."""
    record = _read(home)
    if record is not None and _is_server(record.pid) and _answers(record.api_url):
        return record
    return None


@contextmanager
def _locked(home: Path) -> Iterator[None]:
    """One command at a time looks for the server or starts it: two commands started together
    share one server (an advisory lock where the platform has ``fcntl``)."""
    home.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:
        yield
        return
    with (home / LOCK).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def start(settings: Any, idle_seconds: float) -> tuple[ServerRecord, bool]:
    """The running server of the Prefect settings' home, else a new one once it answers;
    whether it was started now. Another installation's server is stopped and replaced while no
    command uses it (an upgrade), and refused, named, while one does."""
    home = Path(settings.home)
    found = running(home)
    if found is not None and found.ours:
        return found, False
    with _locked(home):
        found = running(home)
        if found is not None and not found.ours:
            if [pid for pid in live_clients(home) if pid != os.getpid()]:
                raise SessionServerError(
                    f"the Prefect server at {found.api_url} (pid {found.pid}) serves the "
                    f"Prefect home {home} for another installation "
                    f"({found.installation or 'unrecorded'}), and commands are using it; this "
                    f"one is {Installation.this()}. Give this installation a Prefect home of "
                    "its own (PREFECT_HOME), or stop that server: `mempipe server stop --force`"
                )
            _terminate(found)
            found = None
        if found is not None:
            return found, False
        return _launch(settings, home, idle_seconds), True


def _launch(settings: Any, home: Path, idle_seconds: float) -> ServerRecord:
    """Start the supervisor in a session of its own, with the command's environment, its
    Prefect settings, and what Prefect's own temporary server sets (no UI, no background
    services; no usage telemetry); wait for it to answer."""
    environment = {
        **os.environ,
        **settings.to_environment_variables(exclude_unset=True),
        "PREFECT_UI_ENABLED": "0",
        "PREFECT__SERVER_EPHEMERAL": "1",
        "PREFECT__SERVER_FINAL": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "MEMPIPE_NO_WATCHDOG": "1",
    }
    (home / RECORD).unlink(missing_ok=True)
    with (home / LOG).open("ab") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                PROCESS_MODULE,
                "--prefect-home",
                str(home),
                "--database",
                _database(settings, home),
                "--idle-seconds",
                str(idle_seconds),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=environment,
        )
    timeout = settings.server.ephemeral.startup_timeout_seconds
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = _read(home)
        if record is not None and record.pid == process.pid and _answers(record.api_url):
            return record
        if process.poll() is not None:
            raise SessionServerError(
                f"mempipe's Prefect server exited ({process.returncode}) before it "
                f"answered; its log: {home / LOG}"
            )
        time.sleep(0.1)
    process.terminate()
    raise SessionServerError(
        f"mempipe's Prefect server did not answer within {timeout:.0f} s; its log: {home / LOG}"
    )


def stop(home: Path, *, force: bool = False, timeout: float = 30.0) -> ServerRecord | None:
    """Stop the running server (it finishes the requests it holds); the one stopped. One that
    commands are using, or another installation's, only when ``force``."""
    with _locked(home):
        record = _read(home)
        if record is None or not _is_server(record.pid):
            (home / RECORD).unlink(missing_ok=True)
            return None
        using = [pid for pid in live_clients(home) if pid != os.getpid()]
        if not force and (using or not record.ours):
            why = (
                f"{len(using)} command(s) are using it (pid {', '.join(map(str, using))})"
                if using
                else f"it is another installation's ({record.installation or 'unrecorded'})"
            )
            raise SessionServerError(
                f"the Prefect server at {record.api_url} (pid {record.pid}) was left running: "
                f"{why}; `mempipe server stop --force` stops it all the same"
            )
        _terminate(record, timeout)
        return record


def _terminate(record: ServerRecord, timeout: float = 30.0) -> None:
    """Stop the server process and wait until it has ended (it finishes the requests it
    holds): ended, not merely past the moment its command line goes, which an exiting process
    loses a little before it is gone."""
    os.kill(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while process_alive(record.pid):
        if time.monotonic() > deadline:
            raise SessionServerError(f"the server (pid {record.pid}) did not stop")
        time.sleep(0.1)
    (Path(record.prefect_home) / RECORD).unlink(missing_ok=True)


@contextmanager
def client(home: Path) -> Iterator[None]:
    """This process uses the server for the block: the server is not idle while it lives (a
    command killed with -9 leaves its mark, which the server ignores once the pid is gone)."""
    folder = home / CLIENTS
    folder.mkdir(parents=True, exist_ok=True)
    mark = folder / str(os.getpid())
    mark.touch()
    try:
        yield
    finally:
        mark.unlink(missing_ok=True)


def live_clients(home: Path) -> list[int]:
    """The pids of the commands using the server now; marks of dead ones are removed."""
    found = []
    with suppress(FileNotFoundError):
        for mark in (home / CLIENTS).iterdir():
            if mark.name.isdigit() and process_alive(int(mark.name)):
                found.append(int(mark.name))
            else:
                mark.unlink(missing_ok=True)
    return sorted(found)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _stop_with_parent() -> None:
    """In the API's process before it runs: it is stopped when the supervisor dies, however
    the supervisor dies (Linux)."""
    with suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _api_process(port: int) -> subprocess.Popen[bytes]:
    """Prefect's API as Prefect's own temporary server runs it: uvicorn with Prefect's app
    factory (the environment says no UI, no background services)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "prefect.server.api.server:create_app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "error",
            "--lifespan",
            "on",
        ],
        stdin=subprocess.DEVNULL,
        preexec_fn=_stop_with_parent if sys.platform.startswith("linux") else None,
    )


def _idle(home: Path, idle_seconds: float, asked: threading.Event, api: Any) -> None:
    """Until asked to stop, the API gone, or no command has used the API for its idle time."""
    used = time.monotonic()
    while not asked.wait(CHECK_S) and api.poll() is None:
        now = time.monotonic()
        if live_clients(home):
            used = now
        elif now - used >= idle_seconds:
            return


def serve(home: Path, database: str, idle_seconds: float) -> None:
    """Supervise Prefect's API on a free loopback port: record where it runs once it answers,
    stop it when idle or asked (SIGTERM, SIGINT), and remove the record."""
    asked = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: asked.set())
    port = _free_port()
    api = _api_process(port)
    record = ServerRecord(
        pid=os.getpid(),
        api_url=f"http://127.0.0.1:{port}/api",
        prefect_home=str(home),
        database=database,
        idle_seconds=idle_seconds,
        started_at=datetime.now(UTC),
        installation=Installation.this(),
    )
    _log(f"starting Prefect's API for {home} on port {port} ({record.installation})")
    try:
        while not _answers(record.api_url):
            if asked.wait(0.1) or api.poll() is not None:
                return
        written = home / f"{RECORD}.{record.pid}"
        written.write_text(record.model_dump_json(indent=2))
        os.replace(written, home / RECORD)
        _log(f"serving {record.api_url}")
        _idle(home, idle_seconds, asked, api)
        _log("stopping: " + ("asked to" if asked.is_set() else "unused, or the API ended"))
    finally:
        if (current := _read(home)) is not None and current.pid == record.pid:
            (home / RECORD).unlink(missing_ok=True)
        api.terminate()
        try:
            api.wait(10)
        except subprocess.TimeoutExpired:
            api.kill()


def _database(settings: Any, home: Path) -> str:
    """Where the server keeps its runs, as shown to a user: a SQLite file's path, or a
    database URL without its password."""
    from mempipe.credentials import public_url

    configured = settings.server.database.connection_url
    if configured is None:
        return str(home / "prefect.db")
    url = configured.get_secret_value()
    return url.split("///", 1)[1] if url.startswith("sqlite") and "///" in url else public_url(url)


def _log(line: str) -> None:
    """One line of the server's log (its stdout is the log file)."""
    print(f"{datetime.now(UTC).isoformat(timespec='seconds')} {line}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {PROCESS_MODULE}")
    parser.add_argument("--prefect-home", type=Path, required=True)
    parser.add_argument("--database", required=True)
    parser.add_argument("--idle-seconds", type=float, required=True)
    given = parser.parse_args(argv)
    serve(given.prefect_home, given.database, given.idle_seconds)
