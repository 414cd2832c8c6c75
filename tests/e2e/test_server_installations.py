"""mempipe's session server belongs to its installation: one in use is stopped only with
``--force``, another installation's is refused while a command uses it and replaced once none
does, and each refusal's hint, followed as written, gets past it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import gone, run
from tests.processes import server_status as status

pytestmark = pytest.mark.process("the session server, shared by commands in processes of their own")
SAMPLE = Path(__file__).parents[2] / "examples" / "sample-archive"


def test_a_server_is_its_installations_and_is_stopped_in_use_only_with_force(env, tmp_path) -> None:
    """A server that commands are using is not stopped without --force. Another installation's
    server on the same Prefect home (its record says so) is named and refused while a command
    uses it, and replaced once none does. Its log opens cleanly and says when it started and
    stopped."""
    started = run(["server", "start", "--json"], tmp_path, env)
    assert started.returncode == 0, started.stderr
    server = json.loads(started.stdout)["server"]
    assert server["installation"]["python"] == sys.executable
    home = tmp_path / "prefect"
    user = subprocess.Popen(["sleep", "120"])
    (home / "mempipe-server.clients").mkdir(exist_ok=True)
    (home / "mempipe-server.clients" / str(user.pid)).touch()
    try:
        busy = run(["server", "stop"], tmp_path, env)
        assert busy.returncode == 1
        assert "1 command(s) are using it" in busy.stderr
        assert "--force" in busy.stderr
        assert status(tmp_path, env)["running"] is True

        record = json.loads((home / "mempipe-server.json").read_text())
        record["installation"]["mempipe"] = "0.0.1"
        (home / "mempipe-server.json").write_text(json.dumps(record))
        refused = run(["backfill", str(SAMPLE), "--store", "sqlite:///other.db"], tmp_path, env)
        assert refused.returncode == 1
        assert "for another installation (mempipe 0.0.1" in refused.stderr
        assert "PREFECT_HOME" in refused.stderr
        assert not (tmp_path / "other.db").exists(), "refused before anything was written"
    finally:
        user.kill()
        user.wait()

    upgraded = run(["backfill", str(SAMPLE), "--store", "sqlite:///other.db"], tmp_path, env)
    assert upgraded.returncode == 0, upgraded.stderr
    assert gone(server["pid"]), "the other installation's idle server was replaced"
    ours = status(tmp_path, env)["server"]
    assert ours["installation"]["mempipe"] != "0.0.1"

    # Each refusal's hint, followed as written while a command uses the server, gets past it.
    for made_foreign in (True, False):
        ours = (
            status(tmp_path, env)["server"]
            or json.loads(run(["server", "start", "--json"], tmp_path, env).stdout)["server"]
        )
        user = subprocess.Popen(["sleep", "120"])
        (home / "mempipe-server.clients" / str(user.pid)).touch()
        try:
            if made_foreign:
                record = json.loads((home / "mempipe-server.json").read_text())
                record["installation"]["mempipe"] = "0.0.1"
                (home / "mempipe-server.json").write_text(json.dumps(record))
                refused = run(["replay", "--store", "sqlite:///other.db"], tmp_path, env)
            else:
                refused = run(["server", "stop"], tmp_path, env)
            assert refused.returncode == 1
            [said] = re.findall(r"`(mempipe [^`]*)`", refused.stderr)
            assert said == "mempipe server stop --force"
            forced = run([*said.split()[1:], "--json"], tmp_path, env)
            assert forced.returncode == 0, forced.stderr
            assert gone(ours["pid"])
            again = run(["replay", "--store", "sqlite:///other.db"], tmp_path, env)
            assert again.returncode == 0, again.stderr
        finally:
            user.kill()
            user.wait()
    forced = run(["server", "stop", "--force", "--json"], tmp_path, env)
    assert forced.returncode == 0, forced.stderr
    log = (home / "mempipe-server.log").read_text()
    assert "Warning" not in log
    assert "starting Prefect's API" in log
    assert f"serving {ours['api_url']}" in log
    assert "stopping: asked to" in log
