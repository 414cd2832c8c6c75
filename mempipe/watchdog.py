"""No orphans: a command killed with -9 leaves no process it started behind.

A flow command may start processes of its own (Prefect's temporary API server, a local Dask
cluster). A process killed with SIGKILL cannot stop them, so each command starts this small
watchdog beside it: it notes the command's descendants every second while the command lives,
and when the command's end of a pipe closes without a word (it died), it terminates them,
then kills those still there after a grace period. A command that ends normally says "done"
first, and its children are left to stop as they do. mempipe's server for a session of
commands is not the command's although the command started it (:mod:`mempipe.cli.session_server`):
the guard leaves it to the commands after.

Linux only (it reads ``/proc``); elsewhere the guard does nothing.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

SCAN_S = 1.0
GRACE_S = 5.0
DONE = b"done\n"
SESSION_SERVER = b"mempipe.cli.session_server"


def children_by_parent() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def descendants(root: int) -> set[int]:
    tree = children_by_parent()
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in tree.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _session_server(pid: int) -> bool:
    try:
        return SESSION_SERVER in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def signal_all(pids: set[int], signum: int) -> set[int]:
    """Signal each; the ones still there."""
    alive = set()
    for pid in pids:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)
            alive.add(pid)
    return alive


def watch(parent: int) -> None:
    """Runs in the watchdog process; stdin is the read end of the command's pipe."""
    me = os.getpid()
    known: set[int] = set()
    received = b""
    while True:
        ready, _, _ = select.select([sys.stdin.buffer], [], [], SCAN_S)
        if ready:
            chunk = os.read(sys.stdin.fileno(), 64)
            if chunk:
                received += chunk
                continue
            break
        known |= descendants(parent) - {me}
    if received.endswith(DONE):
        return
    known |= descendants(parent) - {me}
    spared = {pid for pid in known if _session_server(pid)}
    for server in list(spared):
        spared |= descendants(server)
    remaining = signal_all(known - spared, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while remaining and time.monotonic() < deadline:
        time.sleep(0.2)
        remaining = {pid for pid in remaining if Path(f"/proc/{pid}").exists()}
    signal_all(remaining, signal.SIGKILL)


@contextmanager
def orphan_guard() -> Iterator[None]:
    """Start the watchdog for this process; tell it "done" when the block ends normally or by
    an exception (anything but a kill)."""
    from mempipe.settings import process_environment

    if not sys.platform.startswith("linux") or process_environment().no_watchdog:
        yield
        return
    read_end, write_end = os.pipe()
    try:
        subprocess.Popen(
            [sys.executable, "-m", "mempipe.watchdog", str(os.getpid())],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "MEMPIPE_NO_WATCHDOG": "1"},
        )
    finally:
        os.close(read_end)
    try:
        yield
    finally:
        with suppress(OSError):
            os.write(write_end, DONE)
        os.close(write_end)


if __name__ == "__main__":
    watch(int(sys.argv[1]))
