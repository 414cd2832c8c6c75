"""Whether a run recorded as running is still alive: locks and claims belong to live runs only.

A live run renews its heartbeat every ``HEARTBEAT``; one silent for ``STALE_AFTER`` is dead
(a lost machine, a frozen process). On the run's own machine a process that is gone (kill -9,
OOM) is known dead at once, without waiting for its heartbeat to age.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path

from mempipe.schemas.run import RunRecord, RunStatus

HEARTBEAT = timedelta(seconds=10)
STALE_AFTER = timedelta(seconds=45)
"""Silent this long, a run is dead: its claims and locks are freed within a minute."""
LEASE = timedelta(seconds=60)
"""How long a claim or lock holds without being renewed by its run's heartbeat."""


@cache
def machine_id() -> str:
    """This boot of this machine and this pid namespace: pids are comparable only within it."""
    boot = Path("/proc/sys/kernel/random/boot_id")
    boot_id = boot.read_text().strip() if boot.exists() else socket.gethostname()
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    return f"{boot_id}/{namespace}"


def this_process() -> dict[str, str | int]:
    return {"host": socket.gethostname(), "pid": os.getpid(), "machine": machine_id()}


def process_alive(pid: int) -> bool:
    """On this machine: the process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def death(run: RunRecord, now: datetime) -> str | None:
    """Why a running run is dead, or None while it may be alive."""
    if run.status is not RunStatus.RUNNING:
        return None
    if run.machine == machine_id() and run.pid is not None and not process_alive(run.pid):
        return f"its process {run.pid} on {run.host} is gone"
    last = run.heartbeat_at or run.started_at
    if now - last > STALE_AFTER:
        return f"no heartbeat since {last.isoformat(timespec='seconds')}"
    return None
