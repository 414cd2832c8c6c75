"""Each embedding model its own endpoint and key (``memory.embedding.endpoints``): a move from
one provider to another sends each request to its model's endpoint with its model's key — one
from a variable, one from a Prefect Secret block — never the extractor's key, and neither key
is printed or stored."""

from __future__ import annotations

import json
import os
import secrets
from unittest import mock

import pytest

from mempipe.errors import ConfigError
from mempipe.schemas.config import EmbeddingConfig
from tests.fakes.openai_server import embeddings, fake_openai
from tests.helpers import invoke

pytestmark = pytest.mark.prefect
OLD, NEW = "openai:old-embed:32", "openai:new-embed:32"


def test_a_move_between_two_endpoints_sends_each_model_its_own_key(
    prefect_server, tmp_path, monkeypatch
) -> None:
    from prefect.blocks.system import Secret

    old_key, new_key = (f"sk-{name}-{secrets.token_hex(8)}" for name in ("old", "new"))
    extractor_key = f"sk-extractor-{secrets.token_hex(8)}"
    Secret(value=new_key).save("new-embed-key", overwrite=True)
    archive = tmp_path / "a.jsonl"
    archive.write_text(
        "".join(
            json.dumps({"session_id": f"s{n}", "role": "user", "content": f"seat {n} by a window"})
            + "\n"
            for n in range(12)
        )
    )
    with fake_openai() as (old, old_url), fake_openai() as (new, new_url):
        for fake in (old, new):
            fake.responder = lambda body: embeddings(body, 32)
        (tmp_path / "project-config.yaml").write_text(
            f"memory:\n  embedding:\n    model: {OLD}\n    endpoints:\n"
            f"      {OLD}:\n        base_url: {old_url}\n        api_key_env: OLD_EMBED_KEY\n"
            f"      {NEW}:\n        base_url: {new_url}\n        api_key_secret: new-embed-key\n"
        )
        env = {
            "OLD_EMBED_KEY": old_key,
            "MEMPIPE_LLM_API_KEY": extractor_key,
            "MEMPIPE_LLM_BASE_URL": "http://127.0.0.1:9/v1",
        }
        printed = []
        for command in (
            ["backfill", str(archive), "--user-id", "ann", "--embed"],
            ["reembed", "--model", NEW, "--collections", "stm", "--json"],
            ["search", "seat 3 by a window", "--user-id", "ann", "--mode", "semantic"],
        ):
            done = invoke(*command, cwd=tmp_path, env=env)
            assert done.exit_code == 0, done.output
            printed.append(done.stdout + done.stderr)

    assert old.requests, "the old model's endpoint was asked"
    assert new.requests, "the new model's endpoint was asked"
    assert {r["model"] for r in old.requests} == {"old-embed"}
    assert {r["model"] for r in new.requests} == {"new-embed"}
    assert set(old.authorizations) == {f"Bearer {old_key}"}
    assert set(new.authorizations) == {f"Bearer {new_key}"}
    assert json.loads(printed[1])["model"] == NEW
    stored = (tmp_path / "mempipe.db").read_bytes()
    for key in (old_key, new_key, extractor_key):
        assert all(key not in text for text in printed)
        assert key.encode() not in stored


def test_an_endpoints_key_source_is_named_and_a_missing_key_says_which_variable(
    tmp_path, monkeypatch
) -> None:
    with pytest.raises(ValueError, match="not both"):
        EmbeddingConfig.model_validate(
            {
                "endpoints": {
                    OLD: {"base_url": "http://x/v1", "api_key_env": "A", "api_key_secret": "b"}
                }
            }
        )
    with pytest.raises(ValueError, match="only openai: models"):
        EmbeddingConfig.model_validate({"endpoints": {"hashing-64": {"base_url": "http://x/v1"}}})

    from mempipe.adapters.embedding.registry import embedder_for
    from mempipe.credentials import keep_endpoints

    config = EmbeddingConfig.model_validate(
        {"endpoints": {OLD: {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "NOT_SET_KEY"}}}
    )
    monkeypatch.delenv("NOT_SET_KEY", raising=False)
    with mock.patch.dict(os.environ):
        keep_endpoints(config.endpoints)
        with pytest.raises(ConfigError, match="NOT_SET_KEY, which is not set"):
            embedder_for(OLD)
