"""mempipe's Prefect server for a session of commands: started by the first command that finds
no Prefect API, reused by the next, seen and stopped with ``mempipe server``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.docs import page
from tests.helpers import invoke, noisy_lines
from tests.processes import gone, run, start
from tests.processes import server_status as status

pytestmark = pytest.mark.process("the session server, shared by commands in processes of their own")
ROOT = Path(__file__).parents[2]
SAMPLE = ROOT / "examples" / "sample-archive"
STARTED = "started mempipe's server"


def backfill(store: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    """A verbose backfill: one that starts the server says where it runs."""
    args = ["backfill", str(SAMPLE), "--user-id", "maya", "--store", f"sqlite:///{store}"]
    return start(["-v", *args, "--json"], cwd, env)


def flow_runs(api_url: str) -> list[dict]:
    request = urllib.request.Request(
        f"{api_url}/flow_runs/filter",
        data=b'{"limit": 50}',
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_commands_without_a_prefect_api_share_one_server_that_records_their_runs(
    env, tmp_path
) -> None:
    write_config(tmp_path)
    assert status(tmp_path, env)["running"] is False
    quiet = run(["backfill", str(SAMPLE), "--store", "sqlite:///zero.db"], tmp_path, env)
    assert quiet.returncode == 0, quiet.stderr
    assert STARTED not in quiet.stderr, "stderr is for errors and progress without -v"
    run(["server", "stop"], tmp_path, env)
    first = backfill("one.db", tmp_path, env)
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert STARTED in err, "the command that starts the server says where it runs"
    shown = status(tmp_path, env)
    assert shown["running"] is True
    server = shown["server"]
    assert server["api_url"] in err
    assert server["database"] == str(tmp_path / "prefect" / "prefect.db")

    second = backfill("two.db", tmp_path, env)
    _, err2 = second.communicate(timeout=300)
    assert second.returncode == 0, err2
    assert STARTED not in err2, "the next command reuses it"
    assert status(tmp_path, env)["server"]["pid"] == server["pid"]
    quiet_on_stderr(["replay", "report", "reembed --incremental"], "two.db", tmp_path, env)

    recorded = [flow_run["state_type"] for flow_run in flow_runs(server["api_url"])]
    assert recorded == ["COMPLETED"] * 6, "every command's run is in the Prefect home's database"

    said = run(["server", "status"], tmp_path, env).stdout.strip().splitlines()
    shown = page("operations/session-server.md").splitlines()
    at = next(n for n, line in enumerate(shown) if line.startswith("mempipe's Prefect server"))
    assert masked(said[0]) == masked(shown[at]), "the docs show what `server status` says"
    assert said[1].startswith("started by this installation: mempipe ")
    assert said[1].endswith(sys.executable)
    assert shown[at + 1].startswith("started by this installation: mempipe ")

    stopped = run(["server", "stop", "--json"], tmp_path, env)
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["server"]["pid"] == server["pid"]
    assert gone(server["pid"])
    assert status(tmp_path, env)["running"] is False
    said = run(["server", "status"], tmp_path, env).stdout
    assert said.startswith("No mempipe Prefect server runs for the Prefect home")


def test_two_commands_started_together_start_one_server(env, tmp_path) -> None:
    commands = [backfill(f"{n}.db", tmp_path, env) for n in range(2)]
    ended = [command.communicate(timeout=300) for command in commands]
    assert [command.returncode for command in commands] == [0, 0], ended
    assert sum(STARTED in err for _, err in ended) == 1
    server = status(tmp_path, env)["server"]
    supervisors = [
        entry.name
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit()
        and b"mempipe.cli.session_server" in _cmdline(entry)
        and str(tmp_path).encode() in _cmdline(entry)
    ]
    assert supervisors == [str(server["pid"])]
    run(["server", "stop"], tmp_path, env)


def test_a_configured_prefect_api_is_used_and_no_server_is_started(
    prefect_server, env, tmp_path
) -> None:
    configured = {**env, "PREFECT_API_URL": prefect_server}
    done = run(
        ["backfill", str(SAMPLE), "--user-id", "maya", "--store", "sqlite:///m.db"],
        tmp_path,
        configured,
    )
    assert done.returncode == 0, done.stderr
    assert STARTED not in done.stderr
    shown = status(tmp_path, configured)
    assert shown["running"] is False
    assert shown["configured_api"] == prefect_server


def masked(line: str) -> str:
    """The line with what differs between runs and machines (numbers, the database's path)
    made alike."""
    return re.sub(r"\d+", "0", re.sub(r"database \S+,", "database PATH,", line))


def _cmdline(entry: Path) -> bytes:
    try:
        return (entry / "cmdline").read_bytes()
    except OSError:
        return b""


def write_config(cwd: Path) -> None:
    """The hashing model: what these tests watch is the server, not the embedding."""
    (cwd / "project-config.yaml").write_text("memory:\n  embedding:\n    model: hashing-64\n")


def quiet_on_stderr(commands: list[str], store: str, cwd: Path, env: dict[str, str]) -> None:
    """No traceback, exception text or Prefect warning after a job that did all its work (the
    cancelled server tasks, the events still being sent as a command ends)."""
    for command in commands:
        done = run([*command.split(), "--store", f"sqlite:///{store}"], cwd, env)
        assert done.returncode == 0, done.stderr
        assert noisy_lines(done.stderr) == "", f"{command}: {done.stderr}"


def test_a_command_that_succeeds_prints_nothing_on_stderr_with_a_temporary_server(
    prefect_server, env, tmp_path
) -> None:
    """As with the session's server (the test above), the command starting and stopping
    Prefect's temporary server of its own. That server's noise is its stop, whichever the
    command: the replay, with the most tasks and events in flight as it ends, runs in a process
    of its own; the store it reads is filled in this one."""
    env = {**env, "MEMPIPE_SERVER_MODE": "temporary"}
    write_config(tmp_path)
    filled = invoke(
        "backfill", str(SAMPLE), "--user-id", "maya", "--store", "sqlite:///quiet.db", cwd=tmp_path
    )
    assert filled.exit_code == 0, filled.stderr
    quiet_on_stderr(["replay"], "quiet.db", tmp_path, env)
    assert status(tmp_path, env)["running"] is False, "no session server was started"
