"""What ops do: start a Prefect server on a free port, deploy from prefect.yaml, start a process
worker, run the backfill, replay, audit-report and re-embed deployments with `prefect deployment
run ... --param ... --watch`, and look at the store and the Parquet audit; tear everything
down."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mempipe.adapters.store import open_store
from tests.docs import page
from tests.fakes.openai_server import embeddings, fake_openai
from tests.helpers import extraction_counts, read, write_archive, write_config
from tests.processes import PREFECT, prefect, run, run_deployment, serving_worker, shell

ROOT = Path(__file__).parents[2]

pytestmark = [
    pytest.mark.prefect,
    pytest.mark.process("a deployment run through a Prefect server and a process worker"),
]


def show_run(
    run_id: str, store: str, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess:
    """``mempipe runs show RUN --store STORE``, as ops look a deployment's run up."""
    return run(["runs", "show", run_id, "--store", store], cwd, env, timeout=120)


@pytest.fixture(scope="module")
def deployed(ops_env: dict[str, str]) -> str:
    """The work pool made and every deployment of prefect.yaml deployed, once for the module, as
    the deployments page does; what ``prefect deploy --all`` printed."""
    assert shutil.which(PREFECT)
    prefect("work-pool", "create", "mempipe-local", "--type", "process", env=ops_env)
    return prefect("--no-prompt", "deploy", "--all", env=ops_env).stdout


USERS = 40
"""960 extractions, whose memories the replay embeds in 14 requests to a provider that answers
each in 3 s while the cancel is on its way: the cancel (the ``prefect`` command's start and the
worker's next poll, about 10 s) reaches a run that is still going however busy the machine is;
offline and unhindered, 9,600 extractions could end before it."""
SLOW_MODEL = "openai:fake-embed:32"


def test_a_deployment_run_cancelled_from_prefect_is_recorded_interrupted_and_a_rerun_completes(
    ops_env, deployed, tmp_path
) -> None:
    """The worker's cancel is a SIGTERM to the run's process: the replay stops after the work
    in flight, as it does for a scheduler's SIGTERM."""
    write_archive(tmp_path / "archive.jsonl", USERS)
    config = write_config(tmp_path, model=SLOW_MODEL)
    db = tmp_path / "ops.db"
    args = ["--store", f"sqlite:///{db}", "--config", str(config)]
    with fake_openai() as (fake, url):
        fake.responder = lambda body: embeddings(body, 32, delay=3.0)
        env = {**ops_env, "MEMPIPE_LLM_BASE_URL": url, "OPENAI_API_KEY": "test"}
        loaded = run(["backfill", "archive.jsonl", *args], tmp_path, env, timeout=300)
        assert loaded.returncode == 0, loaded.stderr
        with serving_worker(env, tmp_path):
            started = prefect(
                "deployment",
                "run",
                "replay/replay",
                "--param",
                f"store=sqlite:///{db}",
                "--param",
                f"config={config}",
                "--param",
                "concurrency=1",
                env=env,
            )
            flow_run = re.search(r"UUID: ([0-9a-f-]{36})", started.stdout)
            assert flow_run, started.stdout
            deadline = time.monotonic() + 240
            while not (db.exists() and extraction_counts(db)["done"] >= 1):
                assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
                time.sleep(0.2)
            prefect("flow-run", "cancel", flow_run[1], env=env)
            deadline = time.monotonic() + 60
            while read(db, "SELECT status FROM runs WHERE flow = 'replay'") == [("running",)]:
                assert time.monotonic() < deadline, "the cancelled run never ended"
                time.sleep(0.2)
        [(status, counts)] = read(db, "SELECT status, counts FROM runs WHERE flow = 'replay'")
        assert status == "interrupted"
        assert json.loads(counts)["done"] == extraction_counts(db)["done"] < USERS * 6 * 4
        assert read(db, "SELECT count(*) FROM leases") == [(0,)]
        fake.responder = lambda body: embeddings(body, 32)
        rerun = run(["replay", *args], tmp_path, env, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert extraction_counts(db) == {"done": USERS * 6 * 4}


def test_a_deployment_run_finds_its_store_in_a_secret_block_and_prefect_never_holds_it(
    ops_env, deployed, fixtures, tmp_path
) -> None:
    """Ops keep the store's URL (credentials and all) in a Secret block, created as the secrets page
    shows; the deployment run names the block, the worker's run loads it at run time.
    Prefect's database holds the block (encrypted at rest) and the name, never the URL in
    clear."""
    from tests.leaks import hits_in_database

    db = tmp_path / "secret-store.db"
    url = f"sqlite:///{db}"
    [creating] = re.findall(r"^python -c '(.*?)'$", page("operations/secrets.md"), re.M | re.S)
    saved = subprocess.run(
        [sys.executable, "-c", creating],
        env={**ops_env, "MEMPIPE_STORE": url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert saved.returncode == 0, saved.stderr
    config = tmp_path / "project-config.yaml"
    config.write_text("memory:\n  embedding:\n    model: hashing-128\n")
    with serving_worker(ops_env, tmp_path):
        ran = run_deployment(
            "backfill/backfill",
            {
                "paths": [str(fixtures / "turns.jsonl")],
                "user_id": "maya",
                "identity": "record",
                "store_secret": "mempipe-store",
                "config": str(config),
            },
            ops_env,
            tmp_path,
        )
    assert ran.returncode == 0, ran.stdout + ran.stderr + (tmp_path / "worker.log").read_text()
    opened = open_store(url, migrate=True)
    turns = opened.stats().turns
    opened.close()
    assert turns > 0, "the run wrote to the store the block names"
    assert hits_in_database(Path(ops_env["PREFECT_HOME"]) / "prefect.db", [str(db)]) == []


def flow_runs(env: dict[str, str]) -> int:
    """How many flow runs the server holds."""
    counted = subprocess.run(
        [
            sys.executable,
            "-c",
            "import asyncio\nfrom prefect.client.orchestration import get_client\n"
            "async def main():\n    async with get_client() as c:\n"
            "        print(await c.count_flow_runs())\nasyncio.run(main())",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert counted.returncode == 0, counted.stderr
    return int(counted.stdout)


def said_where_ops_look(watched: subprocess.CompletedProcess, env: dict[str, str]) -> str:
    """The failed run's reason, as ``--watch`` printed it last, as the state's message, and as
    the last line of the run's logs before Prefect's own final one; returns the line."""
    printed = watched.stdout + watched.stderr
    assert watched.returncode == 1, printed
    [run_id] = set(re.findall(r"UUID: ([0-9a-f-]{36})", watched.stdout))
    inspected = json.loads(prefect("flow-run", "inspect", run_id, "-o", "json", env=env).stdout)
    said = inspected["state"]["message"]
    assert said.startswith("error: "), "the state's message is the error line"
    before_failed = printed.split("prefect.flow-run.Failed")[0].rsplit("●", 1)[0]
    unwrapped = "".join(before_failed.split())  # the terminal wraps the line
    assert unwrapped.endswith("".join(said.split())), f"--watch prints it last:\n{printed}"
    assert "mempipe.run.failed*error:" in unwrapped
    logs = prefect("flow-run", "logs", run_id, env={**env, "COLUMNS": "400"}).stdout
    lines = [line.split(" - ", 1)[-1] for line in logs.splitlines() if " | " in line]
    assert "Traceback" not in logs, logs
    assert lines[-2] == said, logs
    assert lines[-1].startswith("Finished in state Failed("), logs
    assert said in lines[-1], logs
    return said


def test_every_failure_of_a_deployment_run_says_why_where_ops_look(
    ops_env, deployed, fixtures, tmp_path
) -> None:
    """Whatever fails and wherever (a parameter no run can take, a store that is not there, a
    store folder missing, the flow's first check), ops read why: a bad value is refused by
    ``prefect deployment run`` before any flow run exists; any other failure is the last thing
    ``--watch`` prints, the state's message, and the last line of the run's logs (no
    traceback); ``mempipe runs show`` prints Prefect's record of a run the store never held."""
    before = flow_runs(ops_env)
    refused = run_deployment(
        "backfill/backfill", {"paths": [str(fixtures)], "format": "chatgtp"}, ops_env, tmp_path
    )
    shown = " ".join((refused.stdout + refused.stderr).split())
    assert "Validation failed for field 'format'" in shown, shown
    assert "'chatgtp' is not one of ['auto', 'chatgpt'" in shown, shown
    assert flow_runs(ops_env) == before, "no flow run was created"

    missing = f"sqlite:///{tmp_path / 'no-such-folder' / 'memory.db'}"
    absent = f"sqlite:///{tmp_path / 'absent.db'}"
    with serving_worker(ops_env, tmp_path):
        folder = run_deployment(
            "backfill/backfill", {"paths": [str(fixtures)], "store": missing}, ops_env, tmp_path
        )
        no_store = run_deployment("replay/replay", {"store": absent}, ops_env, tmp_path)
        first_check = run_deployment(
            "reembed/reembed-migration",
            {"model": "nosuch-model", "store": absent},
            ops_env,
            tmp_path,
        )
    assert "no-such-folder' does not exist" in said_where_ops_look(folder, ops_env)
    assert "absent.db'; nothing was created" in said_where_ops_look(no_store, ops_env)
    assert "unknown embedding model 'nosuch-model'" in said_where_ops_look(first_check, ops_env)
    assert not (tmp_path / "absent.db").exists(), "a failed run creates no store"

    [run_id] = set(re.findall(r"UUID: ([0-9a-f-]{36})", folder.stdout))
    shown_run = show_run(run_id, missing, ops_env, tmp_path)
    assert shown_run.returncode == 0, shown_run.stderr
    assert shown_run.stdout.splitlines()[0] == f"run {run_id}: backfill failed"
    assert "the store has no record of it" in shown_run.stdout
    assert "no-such-folder' does not exist" in shown_run.stdout


def test_the_deployments_pages_run_block_runs_as_written_through_a_worker(
    ops_env, deployed, tmp_path
) -> None:
    """The page's Run block, each command as the page writes it, from a folder holding the
    repository's examples, against a server and a worker set up as its Deploy block says; then
    a move to a real two-sided model on the same store. The store holds what the runs did,
    and ``mempipe runs show`` finds a deployment's run by the id Prefect printed."""
    for name in (
        "backfill/backfill",
        "replay/replay",
        "replay/replay-dask",
        "audit-report/audit-report-daily",
        "reembed/reembed-nightly",
        "reembed/reembed-migration",
        "rebuild-indexes/rebuild-indexes",
    ):
        assert name in deployed
    schedules = prefect("deployment", "inspect", "reembed/reembed-nightly", env=ops_env).stdout
    assert "0 2 * * *" in schedules

    bad = run_deployment("replay/replay", {"concurrency": 0}, ops_env, tmp_path)
    assert bad.returncode != 0
    refused = " ".join((bad.stdout + bad.stderr).split())
    assert "Validation failed for field 'concurrency'" in refused, refused
    assert "0 is less than the minimum of 1" in refused, "refused before any run starts"

    [block] = re.findall(r"## Run\n.*?```bash\n(.*?)```", page("operations/deployments.md"), re.S)
    commands = [c for c in block.replace("\\\n", " ").splitlines() if c.strip()]
    assert commands[0].startswith("mkdir -p"), "the page makes and fills the folder it loads"
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    store = f"sqlite:///{tmp_path / 'data' / 'memory.db'}"
    env = {**ops_env, "MEMPIPE_STORE": store}
    (tmp_path / "data").mkdir()
    printed = []
    with serving_worker(env, tmp_path):
        for command in commands:
            done = shell(
                command.replace("--watch", "--watch --watch-timeout 240"),
                tmp_path,
                {**env, "PATH": f"{Path(PREFECT).parent}:{env['PATH']}"},
            )
            printed.append(done.stdout + done.stderr)
            assert done.returncode == 0, f"{command}:\n{printed[-1]}"
            if "--watch" in command:
                assert "finished successfully in 'Completed'" in printed[-1], printed[-1]
        moved = run_deployment(  # to a real two-sided model, searched on its query side after
            "reembed/reembed-migration", {"model": "multilingual-e5-small"}, env, tmp_path
        )
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert "Completed" in moved.stdout + moved.stderr

    opened = open_store(store, migrate=True)
    stats = opened.stats()
    orgs = opened._conn.execute("SELECT DISTINCT org_id FROM turns").fetchall()
    audited = len(list(opened.audit_rows()))
    registry = opened.registry()
    opened.close()
    assert stats.turns == 20, "the sample's turns went in"
    assert stats.unpromoted_turns == 0
    assert stats.runs == {"completed": 4}, "backfill, replay, the report and the move"
    assert {e.model_id for e in registry if e.state == "serving"} == {"multilingual-e5-small"}
    assert orgs == [("acme",)]
    assert stats.snapshots["done"] == stats.snapshots["total"] > 0
    assert audited > 0
    assert sum(stats.memories[t]["active"] for t in stats.memories) > 0

    [replay] = [
        text for command, text in zip(commands, printed, strict=True) if "replay/" in command
    ]
    [replay_run] = set(re.findall(r"UUID: ([0-9a-f-]{36})", replay))
    shown = show_run(replay_run, store, ops_env, tmp_path)
    assert shown.returncode == 0, shown.stderr
    summary = shown.stdout.splitlines()
    assert summary[0] == f"run {replay_run}: replay completed", "the deployment's run, by its id"
    assert f"audit_dir: {tmp_path / 'data' / 'audit'}" in summary[2], "where the audit went"
    assert "handlers: semantic, episodic, procedural, taxonomic" in summary[2], "words, not repr"
    assert summary[3].startswith("counts: ")
    assert " added" in summary[3]


def test_a_deployed_move_with_a_bridge_answers_searches_while_its_old_model_is_gone(
    ops_env, deployed, tmp_path
) -> None:
    """The scene of ``test_bridge_move.py`` as ops run it: the migration deployment with
    ``bridge``, through a worker; the old model refused from its second batch on."""
    from tests.bridging import BATCH, NEW, check_answers, search_through_bridge, set_scene

    store = f"sqlite:///{tmp_path / 'mempipe.db'}"
    params = {
        "model": NEW,
        "collections": '["stm"]',
        "bridge": "true",
        "sample": "150",
        "batch_size": str(BATCH),
        "gate": str(tmp_path / "q.jsonl"),
        "gate_source": "stm",
        "store": store,
        "config": str(tmp_path / "project-config.yaml"),
    }
    args = [PREFECT, "deployment", "run", "reembed/reembed-migration"]
    for key, value in params.items():
        args += ["--param", f"{key}={value}"]
    with fake_openai() as (old, old_url), fake_openai() as (new, new_url):
        api = {"PREFECT_API_URL": ops_env["PREFECT_API_URL"]}
        gone = set_scene(tmp_path, old, old_url, new, new_url, env=api)
        with serving_worker(ops_env, tmp_path):
            move = subprocess.Popen(
                [*args, "--watch", "--watch-timeout", "240"],
                cwd=tmp_path,
                env=ops_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            assert gone.wait(240), "the deployment's move reached its second batch"
            answers = search_through_bridge(tmp_path)
            assert move.poll() is None, "the searches were answered during the move"
            out, _ = move.communicate(timeout=300)

    assert move.returncode == 0, out
    assert "Completed" in out
    check_answers(answers)
    opened = open_store(store)
    try:
        assert opened.active_embedding("stm") == (NEW, 32), "the gate passed and it switched"
        assert opened.bridges() == [], "the switch retired the bridge"
    finally:
        opened.close()


def test_the_nightly_retention_deployment_forgets_what_the_policy_expires_and_idles_without_one(
    ops_env, deployed, tmp_path
) -> None:
    """``retention/retention-nightly`` on its cron, triggered as ops would: without a policy it
    completes and forgets nothing; with one it forgets what the policy expires (the turns of
    2024, extracted); with a bad one it fails and says why where ops look."""
    schedules = prefect("deployment", "inspect", "retention/retention-nightly", env=ops_env).stdout
    assert "15 1 * * *" in schedules
    write_archive(tmp_path / "archive.jsonl", 2)
    config = write_config(tmp_path)
    store = f"sqlite:///{tmp_path / 'mempipe.db'}"
    for args in (["backfill", "archive.jsonl"], ["replay"]):
        made = run([*args, "--store", store], tmp_path, ops_env)
        assert made.returncode == 0, made.stderr
    params = {"store": store, "config": str(config)}
    turns = "SELECT count(*) FROM turns"
    with serving_worker(ops_env, tmp_path):
        idle = run_deployment("retention/retention-nightly", params, ops_env, tmp_path)
        assert idle.returncode == 0, idle.stdout + idle.stderr
        assert read(tmp_path / "mempipe.db", turns) == [(24,)], "no policy: nothing forgotten"
        config.write_text(config.read_text() + "  retention:\n    turns: {max_age: 90d}\n")
        forgot = run_deployment("retention/retention-nightly", params, ops_env, tmp_path)
        config.write_text(config.read_text().replace("90d", "90 days"))
        bad = run_deployment("retention/retention-nightly", params, ops_env, tmp_path)
    assert forgot.returncode == 0, forgot.stdout + forgot.stderr
    assert "Completed" in forgot.stdout
    assert read(tmp_path / "mempipe.db", turns) == [(0,)]
    forgets = "SELECT count(*), min(rule) FROM audit WHERE action = 'FORGET'"
    assert read(tmp_path / "mempipe.db", forgets) == [(24, "turns.max_age")]
    assert "is not an age" in said_where_ops_look(bad, ops_env)
