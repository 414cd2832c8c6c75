"""``--plan`` writes nothing and starts nothing: no store is created or changed, no run is
recorded, no Prefect server is started; a plan says what the run would send, and batch mode is
refused up front where it cannot work."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import invoke
from tests.processes import environment, run

SAMPLE = Path(__file__).parents[2] / "examples" / "sample-archive"
NO_SERVER = "a command with no Prefect API, which would start a server: a plan starts none"


def mempipe(*args: str, cwd: Path, home: Path, **env: str) -> subprocess.CompletedProcess:
    """The CLI with a Prefect home of its own and no Prefect API: a server it started would
    leave its record there."""
    return run(list(args), cwd, environment(None, PREFECT_HOME=str(home), **env), timeout=300)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.process(NO_SERVER)
def test_a_backfill_plan_counts_the_archives_turns_and_creates_no_store(tmp_path) -> None:
    home, work = tmp_path / "prefect", tmp_path / "work"
    work.mkdir()
    planned = mempipe(
        "backfill",
        str(SAMPLE),
        "--embed",
        "--plan",
        "--json",
        "--store",
        "sqlite:///new.db",
        cwd=work,
        home=home,
    )
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    [probe, turns] = plan["lines"]
    assert (probe["purpose"], turns["purpose"]) == ("probe", "embed stm")
    assert turns["items"] == 20, "the sample's 20 good turns (its bad line is no turn)"
    assert turns["model"] == "all-MiniLM-L6-v2"
    assert turns["provider"] is False
    assert plan["cost"] == {"live_usd": 0.0, "batch_usd": 0.0, "unpriced_models": []}
    assert list(work.iterdir()) == [], "no store, no rejects"
    assert not list(home.rglob("mempipe-server.json")), "no server started"
    without_embed = mempipe("backfill", str(SAMPLE), "--plan", cwd=work, home=home)
    assert without_embed.returncode == 2
    assert "--plan counts what --embed would send" in without_embed.stderr


@pytest.mark.prefect
@pytest.mark.process(NO_SERVER)
def test_reembed_and_replay_plans_change_nothing_and_start_no_server(
    prefect_server, tmp_path
) -> None:
    home = tmp_path / "prefect"
    store = ["--store", "sqlite:///memory.db"]
    loaded = invoke("backfill", str(SAMPLE), *store, cwd=tmp_path)
    assert loaded.exit_code == 0, loaded.output
    before = digest(tmp_path / "memory.db")
    model = ["--model", "openai:text-embedding-3-small"]
    for args in (
        ["reembed", *model, "--plan"],
        ["reembed", *model, "--via", "batch", "--plan", "--json"],
        ["replay", "--extractor", "openai", "--plan", "--json"],
    ):
        planned = mempipe(*args, *store, cwd=tmp_path, home=home, MEMPIPE_LLM_MODEL="gpt-4o-mini")
        assert planned.returncode == 0, planned.stderr
        assert planned.stderr == "", "a plan prints nothing but itself"
    replay = json.loads(planned.stdout)
    assert replay["requests"] == 6 * 4 + 6, "four extractions and a summary a snapshot"
    assert replay["cost"]["live_usd"] > replay["cost"]["batch_usd"] > 0
    assert digest(tmp_path / "memory.db") == before, "the store is as it was"
    assert not home.exists() or not list(home.rglob("mempipe-server.json")), "no server started"


@pytest.mark.prefect
def test_batch_mode_is_refused_where_there_is_no_batch_api(prefect_server, tmp_path) -> None:
    def cli(*args: str):
        return invoke(*args, "--store", "sqlite:///memory.db", cwd=tmp_path)

    assert cli("backfill", str(SAMPLE)).exit_code == 0
    local = cli("reembed", "--model", "hashing-64", "--via", "batch")
    assert local.exit_code == 1
    assert "--via batch needs an OpenAI-compatible model" in local.stderr
    offline = cli("replay", "--via", "batch")
    assert offline.exit_code == 1
    assert "--via batch sends the extractions to a provider" in offline.stderr
