"""A provider that cannot be asked is a setup error said before any request (issue 54): OpenAI's
endpoint without a key fails the command at once with one ``error:`` line naming the settings
that give one, for an embedding model and for the extractor alike; a plan, which sends nothing,
needs no key; an endpoint of one's own (``MEMPIPE_LLM_BASE_URL``) may take none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mempipe.adapters.llm.openai_compat import openai_client
from mempipe.cli import cli
from mempipe.settings import load_llm_settings

SAMPLE = Path(__file__).parents[2] / "examples" / "sample-archive"


@pytest.fixture
def keyless(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("MEMPIPE_LLM_API_KEY", "OPENAI_API_KEY", "MEMPIPE_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def test_a_missing_key_is_a_setup_error_naming_the_settings_before_any_request(
    prefect_server, keyless
) -> None:
    assert CliRunner().invoke(cli, ["backfill", str(SAMPLE), "--user-id", "maya"]).exit_code == 0
    runs_before = json.loads(CliRunner().invoke(cli, ["runs", "--json"]).stdout)
    for args, what in [
        (["reembed", "--model", "openai:text-embedding-3-small"], "openai:text-embedding-3-small"),
        (["replay", "--extractor", "openai"], "the openai extractor (gpt-4o-mini)"),
    ]:
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 1, result.output
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"error: {what}")
        assert "needs an API key: set MEMPIPE_LLM_API_KEY (or OPENAI_API_KEY)" in line
        assert "Connection" not in line
    runs = json.loads(CliRunner().invoke(cli, ["runs", "--json"]).stdout)
    assert len(runs["runs"]) == len(runs_before["runs"]), "refused before any run was recorded"


def test_a_plan_needs_no_key_and_an_endpoint_of_ones_own_may_take_none(
    prefect_server, keyless, monkeypatch
) -> None:
    assert CliRunner().invoke(cli, ["backfill", str(SAMPLE), "--user-id", "maya"]).exit_code == 0
    planned = CliRunner().invoke(
        cli, ["reembed", "--model", "openai:text-embedding-3-small", "--plan", "--json"]
    )
    assert planned.exit_code == 0, planned.output
    assert json.loads(planned.stdout)["requests"] >= 1
    monkeypatch.setenv("MEMPIPE_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert str(openai_client(load_llm_settings(), "a local server").base_url).startswith(
        "http://127.0.0.1:9"
    )
